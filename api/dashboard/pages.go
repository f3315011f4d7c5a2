package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/persistence"
)

func itoa(i int) string { return strconv.Itoa(i) }

func urlPathEscape(s string) string { return url.PathEscape(s) }

// runStatuses lists the run statuses, for the filter.
var runStatuses = []string{"pending", "running", "succeeded", "compensating", "compensated", "failed", "cancelled"}

// runFilter is the runs page's filter, from its query or a bulk form.
type runFilter struct {
	Workflow string
	Status   string
	After    string // datetime-local, UTC
	Before   string
	Q        string // a run id or an idempotency key
	Cursor   string
}

func filterOf(v url.Values) runFilter {
	return runFilter{Workflow: strings.TrimSpace(v.Get("workflow")), Status: v.Get("status"), After: v.Get("after"),
		Before: v.Get("before"), Q: strings.TrimSpace(v.Get("q")), Cursor: v.Get("cursor")}
}

// query is the filter as a query string, without the cursor.
func (f runFilter) query() string {
	v := url.Values{}
	for k, x := range map[string]string{"workflow": f.Workflow, "status": f.Status, "after": f.After, "before": f.Before, "q": f.Q} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v.Encode()
}

const formTime = "2006-01-02T15:04"

// engineFilter turns the page's filter into the engine's (a search that
// names runs by id is answered by runsByID instead).
func (f runFilter) engineFilter(limit int) (engine.RunFilter, error) {
	// The lists and bulk actions show and need no payload: the store
	// reads none.
	ef := engine.RunFilter{Workflow: f.Workflow, Cursor: f.Cursor, Limit: limit, IdempotencyKey: f.Q, NoPayloads: true}
	if f.Status != "" {
		ef.Status = []persistence.RunStatus{persistence.RunStatus(f.Status)}
	}
	for _, x := range []struct {
		s   string
		dst *time.Time
		nm  string
	}{{f.After, &ef.CreatedAfter, "created after"}, {f.Before, &ef.CreatedBefore, "created before"}} {
		if x.s == "" {
			continue
		}
		t, err := time.ParseInLocation(formTime, x.s, time.UTC)
		if err != nil {
			return ef, &httpError{status: http.StatusBadRequest, msg: "The " + x.nm + " time " + strconv.Quote(truncate(x.s)) + " is not a date and time (YYYY-MM-DDTHH:MM, UTC)"}
		}
		*x.dst = t
	}
	return ef, nil
}

func (d *Dashboard) runsPage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx := r.Context()
	f := filterOf(r.URL.Query())
	data := map[string]any{"Filter": f, "Statuses": runStatuses, "FilterQuery": f.query()}
	runs, more, err := d.runsByID(ctx, f.Q)
	if err != nil {
		return err
	}
	switch {
	case len(runs) == 1 && runs[0].ID != f.Q:
		// A prefix of one run's id: that run.
		return d.redirect(w, r, "/runs/"+url.PathEscape(runs[0].ID), "")
	case len(runs) > 0:
		// The run of a whole id, or the runs a shared prefix matches.
		data["MoreMatches"] = more
	default:
		ef, err := f.engineFilter(50)
		if err != nil {
			return err
		}
		page, err := d.e.Runs(ctx, ef)
		if err != nil {
			return badFilter(err)
		}
		runs = page.Runs
		data["Next"] = page.NextCursor
	}
	wfs, err := d.e.Definitions(ctx)
	if err != nil {
		return err
	}
	names := make([]string, len(wfs))
	for i, wd := range wfs {
		names[i] = wd.Name
	}
	data["Runs"] = runs
	data["Workflows"] = names
	data["Paged"] = f.Cursor != ""
	d.render(w, r, s, http.StatusOK, "runs", "Runs", data)
	return nil
}

func badFilter(err error) error {
	if errors.Is(err, persistence.ErrInvalid) {
		return &httpError{status: http.StatusBadRequest, msg: "The filter is not valid", err: err}
	}
	return err
}

func (d *Dashboard) workflowsPage(w http.ResponseWriter, r *http.Request, s *session) error {
	wfs, err := d.e.Definitions(r.Context())
	if err != nil {
		return err
	}
	d.render(w, r, s, http.StatusOK, "workflows", "Workflows", map[string]any{"Workflows": wfs})
	return nil
}

func (d *Dashboard) workflowPage(w http.ResponseWriter, r *http.Request, s *session) error {
	return d.workflowForm(w, r, s, http.StatusOK, "", "")
}

// workflowForm draws a workflow's page, its trigger form holding input
// and saying formErr when set (answered to the form's POST, never put
// in a URL: the input may hold secrets).
func (d *Dashboard) workflowForm(w http.ResponseWriter, r *http.Request, s *session, status int, input, formErr string) error {
	ctx := r.Context()
	name := r.PathValue("name")
	if !names.Valid(name) {
		// Not a name the engine could hold: no workflow, and no store
		// query (whose refusal would be a 500).
		return &httpError{status: http.StatusNotFound, msg: "There is no workflow " + strconv.Quote(truncate(name)) + "."}
	}
	versions, err := d.e.DefinitionVersions(ctx, name)
	if errors.Is(err, engine.ErrUnknownWorkflow) {
		return &httpError{status: http.StatusNotFound, msg: "There is no workflow " + strconv.Quote(truncate(name)) + "."}
	}
	if err != nil {
		return err
	}
	cur := versions[0]
	if v := r.URL.Query().Get("version"); v != "" {
		for _, x := range versions {
			if x.Version == v {
				cur = x
			}
		}
	}
	g, err := buildGraph(planOf(cur.Definition), nil, nil, "", false)
	if err != nil {
		return err
	}
	scheds, err := d.e.Schedules(ctx)
	if err != nil {
		return err
	}
	var mine []engine.ScheduleInfo
	for _, sc := range scheds {
		if sc.Workflow == name {
			mine = append(mine, sc)
		}
	}
	recent, err := d.e.Runs(ctx, engine.RunFilter{Workflow: name, Limit: 10})
	if err != nil {
		return err
	}
	// The form starts runs of the current version: it starts from that
	// version's example input, and shows its schema.
	def := versions[0].Definition
	if input == "" && formErr == "" {
		input = prettyJSON(def.ExampleInput)
	}
	d.render(w, r, s, status, "workflow", "Workflow "+name, map[string]any{
		"Name": name, "Current": cur, "Versions": versions, "Graph": g, "Schedules": mine, "Recent": recent.Runs,
		"Input": input, "InputRows": inputRows(input), "Schema": prettyJSON(def.InputSchema), "Error": formErr,
	})
	return nil
}

// deadRow is a dead letter with its run's workflow.
type deadRow struct {
	persistence.StepRun
	Workflow string
	// Retryable: the run's status allows a retry of the step (it failed).
	Retryable bool
	// Rerun: it does not, and a rerun from a step resumes the run (it
	// compensated); Refusal says why the retry is refused.
	Rerun   bool
	Refusal string
}

func (d *Dashboard) deadLettersPage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx := r.Context()
	q := r.URL.Query()
	page, err := d.e.DeadLetters(ctx, persistence.StepListDeadParams{Workflow: q.Get("workflow"), Cursor: q.Get("cursor"), Limit: 50})
	if err != nil {
		return badFilter(err)
	}
	rows := make([]deadRow, len(page.Steps))
	runs := map[string]persistence.Run{}
	for i, st := range page.Steps {
		run, ok := runs[st.RunID]
		if !ok {
			if r, err := d.e.GetRun(ctx, st.RunID); err == nil {
				run, runs[st.RunID] = r, r
			}
		}
		rows[i] = deadRow{StepRun: st, Workflow: run.Workflow, Refusal: run.Status.ActionRefusal(persistence.ActionRetry)}
		rows[i].Retryable = rows[i].Refusal == ""
		rows[i].Rerun = !rows[i].Retryable && run.Status.ActionRefusal(persistence.ActionRerun) == ""
	}
	d.render(w, r, s, http.StatusOK, "deadletters", "Dead letters", map[string]any{
		"Rows": rows, "Next": page.NextCursor, "Workflow": q.Get("workflow"), "Paged": q.Get("cursor") != "",
	})
	return nil
}

// scheduleRow is a schedule with its last ticks.
type scheduleRow struct {
	engine.ScheduleInfo
	Ticks []persistence.ScheduleTick
	Zone  string
}

func (d *Dashboard) schedulesPage(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx := r.Context()
	list, err := d.e.Schedules(ctx)
	if err != nil {
		return err
	}
	rows := make([]scheduleRow, len(list))
	for i, sc := range list {
		ticks, err := d.e.ScheduleHistory(ctx, sc.Name, 5)
		if err != nil {
			return err
		}
		zone := sc.TimeZone
		if zone == "" {
			zone = "UTC"
		}
		rows[i] = scheduleRow{ScheduleInfo: sc, Ticks: ticks, Zone: zone}
	}
	d.render(w, r, s, http.StatusOK, "schedules", "Schedules", map[string]any{"Schedules": rows})
	return nil
}

func (d *Dashboard) queuesPage(w http.ResponseWriter, r *http.Request, s *session) error {
	var qs []client.Queue
	available := d.cfg.Queues != nil
	if available {
		var err error
		if qs, err = d.cfg.Queues(r.Context()); err != nil {
			return err
		}
	}
	d.render(w, r, s, http.StatusOK, "queues", "Queues", map[string]any{"Queues": qs, "Available": available})
	return nil
}

// nodeRow is a node with what the page shows of it.
type nodeRow struct {
	engine.NodeInfo
	Age       time.Duration
	Load      int // percent of its concurrency
	Workflows []string
}

func (d *Dashboard) nodesPage(w http.ResponseWriter, r *http.Request, s *session) error {
	nodes, err := d.e.AllNodes(r.Context())
	if err != nil {
		return err
	}
	now := d.cfg.Now()
	rows := make([]nodeRow, len(nodes))
	for i, n := range nodes {
		rows[i] = nodeRow{NodeInfo: n, Age: now.Sub(n.HeartbeatAt)}
		if n.Concurrency > 0 {
			rows[i].Load = 100 * n.StepsRunning / n.Concurrency
		}
		for wf, steps := range n.Workflows {
			rows[i].Workflows = append(rows[i].Workflows, wf+" ("+itoa(len(steps))+" steps)")
		}
		sort.Strings(rows[i].Workflows)
	}
	d.render(w, r, s, http.StatusOK, "nodes", "Nodes", map[string]any{"Nodes": rows})
	return nil
}
