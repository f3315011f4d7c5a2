package dashboard

import (
	"context"
	"errors"

	"github.com/google/uuid"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// runsByID answers a runs search that names runs by their id: a whole
// run id gives its run; a prefix of a UUID run id (8 or more hex digits
// and dashes, engine.ResolveRunID) the one run it names or, shared, the
// runs it matches (the first engine.MaxAmbiguousMatches; more says there
// are others). None when q names no run by id: the search is then an
// idempotency key.
func (d *Dashboard) runsByID(ctx context.Context, q string) (runs []persistence.Run, more bool, err error) {
	if _, err := uuid.Parse(q); err != nil && !idPrefix(q) {
		return nil, false, nil
	}
	var ids []string
	id, err := d.e.ResolveRunID(ctx, q)
	var amb *engine.AmbiguousIDError
	switch {
	case errors.As(err, &amb):
		ids, more = amb.Matches, amb.More
	case errors.Is(err, persistence.ErrRunNotFound), errors.Is(err, persistence.ErrInvalid):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	default:
		ids = []string{id}
	}
	for _, id := range ids {
		run, err := d.e.GetRun(ctx, id)
		switch {
		case err == nil:
			runs = append(runs, run)
		case !errors.Is(err, persistence.ErrRunNotFound):
			return nil, false, err
		}
	}
	return runs, more, nil
}

// idPrefix reports whether q could be a prefix of a UUID run id that
// ResolveRunID takes: 8 to 36 hex digits and dashes.
func idPrefix(q string) bool {
	if len(q) < persistence.MinRunIDPrefix || len(q) > 36 {
		return false
	}
	for i := 0; i < len(q); i++ {
		c := q[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return true
}
