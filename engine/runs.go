package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// RunFilter selects and pages the runs Runs lists. Zero values mean no
// filter; the filters that are set must all hold.
type RunFilter struct {
	// Workflow lists only the runs of the named workflow.
	Workflow string
	// Schedule lists only the runs started by the named schedule.
	Schedule string
	// Status lists only the runs in one of these statuses (a status named
	// twice counts once).
	Status []persistence.RunStatus
	// CreatedAfter lists only the runs created at or after it (inclusive).
	CreatedAfter time.Time
	// CreatedBefore lists only the runs created before it (exclusive).
	CreatedBefore time.Time
	// IdempotencyKey lists only the runs started with this key (of any
	// workflow, unless Workflow is set too).
	IdempotencyKey string
	// Cursor continues a listing: the NextCursor of the page before, with
	// the same filters. Empty for the first page.
	Cursor string
	// Limit is the most runs on a page: 50 when zero or negative, at most
	// 1000 (more is taken as 1000).
	Limit int
	// NoPayloads leaves the runs' Input and Output nil: the store does
	// not read them, so a page of runs with large payloads costs no more
	// than one without (a list that shows none of them).
	NoPayloads bool
}

// Runs lists runs, newest first (by creation time, then id), a page at a
// time: a page's NextCursor, passed back as f.Cursor with the same
// filters, gives the next page; it is empty on the last page. Pages are
// keyed by the runs' creation, which never changes, so a listing shows a
// run at most once, and runs created while it is paged through (newer
// than its pages) are left to a new listing; a run whose status leaves
// the filter meanwhile may be missed. Every page is an index seek, the
// deepest as cheap as the first.
//
// A filter the store refuses (an unknown status, a malformed workflow or
// schedule name, a cursor that is not one of this listing's) gives an
// error that names the value and wraps a *persistence.ValidationError
// (errors.Is(err, persistence.ErrInvalid)); other store errors keep their
// sentinels for errors.Is too. The runs' payloads are decoded
// (Config.Codec); one that cannot be decoded (its key is not in the
// keyring) is left empty, and the run's PayloadError says why.
func (e *Engine) Runs(ctx context.Context, f RunFilter) (persistence.RunPage, error) {
	var page persistence.RunPage
	err := e.read(ctx, func(st persistence.Store) (err error) {
		page, err = st.RunList(ctx, persistence.RunListParams{
			Workflow:       f.Workflow,
			Schedule:       f.Schedule,
			Status:         f.Status,
			CreatedAfter:   f.CreatedAfter,
			CreatedBefore:  f.CreatedBefore,
			IdempotencyKey: f.IdempotencyKey,
			Cursor:         f.Cursor,
			Limit:          f.Limit,
			NoPayloads:     f.NoPayloads,
		})
		return err
	})
	if err != nil {
		return persistence.RunPage{}, fmt.Errorf("engine: list runs: %w", err)
	}
	for i := range page.Runs {
		e.markRun(ctx, &page.Runs[i])
	}
	return page, nil
}
