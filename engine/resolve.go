package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/dagflow/dagflow/persistence"
)

// MaxAmbiguousMatches is how many of the runs a shared run id prefix
// matches an *AmbiguousIDError lists.
const MaxAmbiguousMatches = 10

// AmbiguousIDError reports a run id prefix that more than one run's id
// starts with.
type AmbiguousIDError struct {
	Prefix  string   // the prefix, as typed
	Matches []string // the first matching ids, in id order, at most MaxAmbiguousMatches
	More    bool     // more runs match than Matches lists
}

func (e *AmbiguousIDError) Error() string {
	more := ""
	if e.More {
		more = ", and more"
	}
	return fmt.Sprintf("engine: run id prefix %q matches more than one run: %s%s; give more of the id", e.Prefix, strings.Join(e.Matches, ", "), more)
}

// ResolveRunID returns the id of the run idOrPrefix names: a whole run
// id, returned as it is without a read (whether the run exists is for
// the read that follows to say), or a prefix of one. A prefix of a UUID
// (hex digits and dashes, see persistence.RunIDPrefix) of at least
// persistence.MinRunIDPrefix characters, with or without its dashes,
// names the one run whose id starts with it; shorter, it is refused
// with an error that says so (Is persistence.ErrInvalid). A prefix of no
// run gives ErrRunNotFound, of several an *AmbiguousIDError, unless one
// id is the prefix itself. Input that is no UUID prefix (such as a run
// id of another form) is returned as it is. It reads like Get (the
// read replica, unless ctx says ReadPrimary, falling back to the
// primary when the replica has no match).
func (e *Engine) ResolveRunID(ctx context.Context, idOrPrefix string) (string, error) {
	if persistence.IsCanonicalRunID(idOrPrefix) || !uuidPrefix(idOrPrefix) {
		return idOrPrefix, nil
	}
	var ids []string
	err := e.read(ctx, func(st persistence.Store) (err error) {
		ids, err = st.RunResolve(ctx, idOrPrefix, MaxAmbiguousMatches+1)
		if err == nil && len(ids) == 0 {
			err = persistence.ErrRunNotFound
		}
		return err
	})
	switch {
	case err != nil && notFound(err):
		return "", fmt.Errorf("%w: no run id starts with %q", persistence.ErrRunNotFound, idOrPrefix)
	case err != nil:
		return "", err
	case len(ids) == 1:
		return ids[0], nil
	}
	if p, _ := persistence.RunIDPrefix(idOrPrefix); slices.Contains(ids, p) {
		return p, nil
	}
	return "", &AmbiguousIDError{Prefix: idOrPrefix, Matches: ids[:min(len(ids), MaxAmbiguousMatches)], More: len(ids) > MaxAmbiguousMatches}
}

// uuidPrefix reports whether s could be the start of a UUID: hex digits
// and dashes only.
func uuidPrefix(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '-') {
			return false
		}
	}
	return s != ""
}
