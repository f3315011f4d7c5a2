package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// triggerOrder starts an order run through the raw API, with an optional
// idempotency key, and returns its id.
func triggerOrder(t testing.TB, env *apiEnv, input, key string) string {
	t.Helper()
	var hdr []string
	if key != "" {
		hdr = append(hdr, "Idempotency-Key: "+key)
	}
	r := env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":`+input+`}`, hdr...)
	var run client.Run
	r.decode(t, http.StatusCreated, &run)
	if run.ID == "" || r.header.Get("Location") != "/v1/runs/"+run.ID {
		t.Fatalf("trigger: run %+v, Location %q", run, r.header.Get("Location"))
	}
	return run.ID
}

// countRuns returns how many runs the store has.
func countRuns(t testing.TB, env *apiEnv) int {
	t.Helper()
	page, err := env.Engine.Runs(context.Background(), engine.RunFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(page.Runs)
}

func TestTrigger(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		ctx := context.Background()
		c := env.anon

		// Without a key: 201, Location, the run.
		run, created, err := c.Trigger(ctx, "order", client.TriggerRequest{
			Input:    json.RawMessage(`{"order_id":"o-1"}`),
			Metadata: map[string]string{"tenant": "acme"},
		})
		if err != nil || !created || run.ID == "" || run.Workflow != "order" {
			t.Fatalf("trigger = %+v, created %v, %v", run, created, err)
		}
		if string(run.Input) != `{"order_id":"o-1"}` || run.Metadata["tenant"] != "acme" {
			t.Fatalf("run input %s metadata %v", run.Input, run.Metadata)
		}
		d := env.waitStatus(t, run.ID, "succeeded")
		if len(d.Steps) != 3 || len(d.Attempts) != 3 {
			t.Fatalf("detail: %d steps, %d attempts, want 3 and 3", len(d.Steps), len(d.Attempts))
		}
		var out map[string]map[string]string
		if err := json.Unmarshal(d.Output, &out); err != nil || out["ship"]["step"] != "ship" {
			t.Fatalf("run output %s: %v", d.Output, err)
		}
		for _, s := range d.Steps {
			if s.Status != "succeeded" || !strings.Contains(string(s.Output), s.Step) {
				t.Fatalf("step %+v", s)
			}
		}

		// Idempotency-Key: 201, then 200 with the same run, then 409
		// naming it for another input.
		first, created, err := c.Trigger(ctx, "order", client.TriggerRequest{Input: json.RawMessage(`{"n":1}`), IdempotencyKey: "k-1"})
		if err != nil || !created {
			t.Fatalf("first = %+v, %v, %v", first, created, err)
		}
		again, created, err := c.Trigger(ctx, "order", client.TriggerRequest{Input: json.RawMessage(`{"n":1}`), IdempotencyKey: "k-1"})
		if err != nil || created || again.ID != first.ID {
			t.Fatalf("repeat = %+v, created %v, %v; want run %s, not created", again, created, err, first.ID)
		}
		_, _, err = c.Trigger(ctx, "order", client.TriggerRequest{Input: json.RawMessage(`{"n":2}`), IdempotencyKey: "k-1"})
		p := problemOf(t, err, http.StatusConflict, api.CodeIdempotencyConflict)
		if p.RunID != first.ID || !strings.Contains(p.Detail, first.ID) {
			t.Fatalf("conflict %+v, want run %s named", p, first.ID)
		}
		// The body's idempotency_key does the same, raw.
		r := env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":{"n":1},"idempotency_key":"k-1"}`)
		var same client.Run
		r.decode(t, http.StatusOK, &same)
		if same.ID != first.ID {
			t.Fatalf("body key: run %s, want %s", same.ID, first.ID)
		}
		r = env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":{"n":3},"idempotency_key":"k-2"}`)
		r.decode(t, http.StatusCreated, &same)
		if r.header.Get("Location") != "/v1/runs/"+same.ID {
			t.Fatalf("Location %q", r.header.Get("Location"))
		}
		// An empty body starts a run with a null input.
		r = env.raw(t, "POST", "/v1/workflows/order/runs", "")
		var empty client.Run
		r.decode(t, http.StatusCreated, &empty)
		if string(empty.Input) != "null" {
			t.Fatalf("empty body: input %s", empty.Input)
		}

		// Refusals: a 4xx naming the problem, and nothing stored.
		before := countRuns(t, env)
		env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":`).problem(t, 400, api.CodeInvalidJSON)
		env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":1} {}`).problem(t, 400, api.CodeInvalidJSON)
		p2 := env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":1,"colour":"red"}`).problem(t, 400, api.CodeInvalidJSON)
		if !strings.Contains(p2.Detail, "colour") {
			t.Fatalf("unknown field: detail %q does not name it", p2.Detail)
		}
		env.raw(t, "POST", "/v1/workflows/order/runs", `{"metadata":{"a":1}}`).problem(t, 400, api.CodeInvalidJSON)
		env.raw(t, "POST", "/v1/workflows/order/runs", `{"start_at":"tomorrow"}`).problem(t, 400, api.CodeInvalidJSON)
		big := `{"input":"` + strings.Repeat("x", api.DefaultMaxBodyBytes) + `"}`
		env.raw(t, "POST", "/v1/workflows/order/runs", big).problem(t, 413, api.CodeBodyTooLarge)
		env.raw(t, "POST", "/v1/workflows/order/runs", `input=1`, "Content-Type: application/x-www-form-urlencoded").problem(t, 415, api.CodeUnsupportedMedia)
		p3 := env.raw(t, "POST", "/v1/workflows/nope/runs", `{}`).problem(t, 404, api.CodeWorkflowNotFound)
		if !strings.Contains(p3.Detail, "nope") {
			t.Fatalf("unknown workflow: detail %q", p3.Detail)
		}
		env.raw(t, "POST", "/v1/workflows/9lives/runs", `{}`).problem(t, 400, api.CodeInvalidName)
		env.raw(t, "POST", "/v1/workflows/order/runs", `{"idempotency_key":"a"}`, "Idempotency-Key: b").problem(t, 400, api.CodeInvalidParameter)
		env.raw(t, "POST", "/v1/workflows/order/runs", `{}`, "Idempotency-Key: "+strings.Repeat("k", 256)).problem(t, 400, api.CodeInvalidParameter)
		env.raw(t, "POST", "/v1/workflows/order/runs", `{"metadata":{"a\u0000":"b"}}`).problem(t, 400, api.CodeInvalidParameter)
		if after := countRuns(t, env); after != before {
			t.Fatalf("refused requests stored runs: %d -> %d", before, after)
		}
		// Through the client, the same refusals are *Problems.
		_, _, err = c.Trigger(ctx, "nope", client.TriggerRequest{})
		problemOf(t, err, 404, api.CodeWorkflowNotFound)
		_, _, err = c.Trigger(ctx, "9lives", client.TriggerRequest{})
		problemOf(t, err, 400, api.CodeInvalidName)
		_, _, err = c.Trigger(ctx, "order", client.TriggerRequest{Input: json.RawMessage(`"` + strings.Repeat("x", api.DefaultMaxBodyBytes) + `"`)})
		problemOf(t, err, 413, api.CodeBodyTooLarge)

		// A delayed start.
		at := env.Clock.Now().Add(time.Hour)
		later, created, err := c.Trigger(ctx, "order", client.TriggerRequest{StartAt: &at})
		if err != nil || !created || later.Status != "pending" || !later.StartAt.Equal(at) {
			t.Fatalf("delayed = %+v, %v, %v", later, created, err)
		}
	})
}

func TestRuns(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		ctx := context.Background()
		c := env.anon
		t0 := env.Clock.Now()
		var ids []string
		for i := 0; i < 5; i++ {
			ids = append(ids, triggerOrder(t, env, `{"i":`+string(rune('0'+i))+`}`, "key-"+string(rune('a'+i))))
			env.Clock.Advance(time.Second)
		}
		failed := triggerOrder(t, env, `{"fail":"charge"}`, "")
		for _, id := range ids {
			env.waitStatus(t, id, "succeeded")
		}
		env.waitStatus(t, failed, "failed")

		// Newest first, paged with a keyset cursor.
		var seen []string
		f := client.RunFilter{Workflow: "order", Limit: 2}
		for pages := 0; ; pages++ {
			page, err := c.ListRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range page.Runs {
				seen = append(seen, r.ID)
			}
			if page.NextCursor == "" {
				break
			}
			if pages > 5 {
				t.Fatal("too many pages")
			}
			f.Cursor = page.NextCursor
		}
		want := append([]string{failed}, reverse(ids)...)
		if strings.Join(seen, ",") != strings.Join(want, ",") {
			t.Fatalf("paged runs %v, want %v", seen, want)
		}
		// Filters.
		list := func(f client.RunFilter) []string {
			t.Helper()
			page, err := c.ListRuns(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, r := range page.Runs {
				out = append(out, r.ID)
			}
			return out
		}
		if got := list(client.RunFilter{Status: []string{"failed"}}); len(got) != 1 || got[0] != failed {
			t.Fatalf("status=failed: %v", got)
		}
		if got := list(client.RunFilter{Status: []string{"failed", "succeeded"}}); len(got) != 6 {
			t.Fatalf("status=failed&status=succeeded: %v", got)
		}
		var comma client.RunList
		env.raw(t, "GET", "/v1/runs?status=failed,cancelled", "").decode(t, 200, &comma)
		if len(comma.Runs) != 1 || comma.NextCursor != "" {
			t.Fatalf("status=failed,cancelled: %+v", comma)
		}
		if got := list(client.RunFilter{CreatedAfter: t0.Add(2 * time.Second), CreatedBefore: t0.Add(4 * time.Second)}); strings.Join(got, ",") != ids[3]+","+ids[2] {
			t.Fatalf("created in [t0+2s, t0+4s): %v, want %v", got, []string{ids[3], ids[2]})
		}
		if got := list(client.RunFilter{IdempotencyKey: "key-c"}); len(got) != 1 || got[0] != ids[2] {
			t.Fatalf("idempotency_key=key-c: %v, want %s", got, ids[2])
		}
		if got := list(client.RunFilter{Workflow: "other"}); len(got) != 0 {
			t.Fatalf("workflow=other: %v", got)
		}
		for _, q := range []string{"status=done", "created_after=yesterday", "limit=0", "limit=1001", "limit=x", "workflow=9x", "colour=red", "cursor=garbage", "limit=1&limit=2"} {
			code := api.CodeInvalidParameter
			if strings.HasPrefix(q, "workflow=") {
				code = api.CodeInvalidName
			}
			env.raw(t, "GET", "/v1/runs?"+q, "").problem(t, 400, code)
		}
		_, err := c.ListRuns(ctx, client.RunFilter{Status: []string{"done"}})
		problemOf(t, err, 400, api.CodeInvalidParameter)

		// One run, with its steps, attempts and outputs.
		d, err := c.GetRun(ctx, failed)
		if err != nil {
			t.Fatal(err)
		}
		if d.Run.Status != "failed" || len(d.Steps) != 3 {
			t.Fatalf("failed run: %+v", d)
		}
		byStep := map[string]client.Step{}
		for _, s := range d.Steps {
			byStep[s.Step] = s
		}
		if byStep["charge"].Status != "dead" || !strings.Contains(byStep["charge"].Error, "failed as asked") || byStep["ship"].Queue != "shipping" {
			t.Fatalf("failed run's steps: %+v", byStep)
		}
		p := env.raw(t, "GET", "/v1/runs/0190a0b0-0000-7000-8000-000000000000", "").problem(t, 404, api.CodeRunNotFound)
		if p.RunID != "0190a0b0-0000-7000-8000-000000000000" {
			t.Fatalf("not found: run_id %q", p.RunID)
		}
		env.raw(t, "GET", "/v1/runs/"+url.PathEscape("no such run!"), "").problem(t, 400, api.CodeInvalidName)
		_, err = c.GetRun(ctx, "0190a0b0-0000-7000-8000-000000000000")
		problemOf(t, err, 404, api.CodeRunNotFound)
	})
}

func reverse(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}

func TestCancelAndRetry(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		ctx := context.Background()
		c := env.anon

		blocked := triggerOrder(t, env, `{"block":"charge"}`, "")
		run, err := c.CancelRun(ctx, blocked)
		if err != nil || run.Status != "cancelled" {
			t.Fatalf("cancel = %+v, %v", run, err)
		}
		_, err = c.CancelRun(ctx, blocked)
		p := problemOf(t, err, 409, api.CodeRunFinished)
		if p.RunID != blocked {
			t.Fatalf("cancel twice: run_id %q", p.RunID)
		}
		env.raw(t, "POST", "/v1/runs/"+blocked+"/cancel", "").problem(t, 409, api.CodeRunFinished)
		env.raw(t, "POST", "/v1/runs/0190a0b0-0000-7000-8000-000000000000/cancel", "").problem(t, 404, api.CodeRunNotFound)
		env.raw(t, "GET", "/v1/runs/"+blocked+"/cancel", "").problem(t, 405, api.CodeMethodNotAllowed)

		// A run whose charge went dead is resumed by retry.
		failed := triggerOrder(t, env, `{"fail":"charge"}`, "")
		env.waitStatus(t, failed, "failed")
		env.healed.Store(true)
		res, err := c.RetryRun(ctx, failed, client.RetryRequest{})
		if err != nil || strings.Join(res.Steps, ",") != "charge" || res.Run.ID != failed {
			t.Fatalf("retry = %+v, %v", res, err)
		}
		env.waitStatus(t, failed, "succeeded")
		r := env.raw(t, "POST", "/v1/runs/"+failed+"/retry", "")
		if r.status != http.StatusConflict {
			t.Fatalf("retry of a succeeded run: %d %s", r.status, r.body)
		}
		var pr client.Problem
		r.decode(t, http.StatusConflict, &pr)
		if pr.RunID != failed || (pr.Code != api.CodeRetryRefused && pr.Code != api.CodeConflict) {
			t.Fatalf("retry of a succeeded run: %+v", pr)
		}
		_, err = c.RetryRun(ctx, "0190a0b0-0000-7000-8000-000000000000", client.RetryRequest{})
		problemOf(t, err, 404, api.CodeRunNotFound)
	})
}

func TestDeadLetters(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{})
		ctx := context.Background()
		c := env.anon
		f2 := triggerOrder(t, env, `{"fail":"charge"}`, "")
		env.Clock.Advance(time.Second)
		f3 := triggerOrder(t, env, `{"fail":"charge"}`, "")
		env.waitStatus(t, f2, "failed")
		env.waitStatus(t, f3, "failed")

		page, err := c.ListDeadLetters(ctx, client.DeadLetterFilter{Workflow: "order"})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.DeadLetters) != 2 || page.DeadLetters[0].Step != "charge" || !strings.Contains(page.DeadLetters[0].Error, "failed as asked") {
			t.Fatalf("dead letters: %+v", page)
		}
		one, err := c.ListDeadLetters(ctx, client.DeadLetterFilter{Limit: 1})
		if err != nil || len(one.DeadLetters) != 1 || one.NextCursor == "" {
			t.Fatalf("first page of one: %+v, %v", one, err)
		}
		two, err := c.ListDeadLetters(ctx, client.DeadLetterFilter{Limit: 1, Cursor: one.NextCursor})
		if err != nil || len(two.DeadLetters) != 1 || two.DeadLetters[0].RunID == one.DeadLetters[0].RunID {
			t.Fatalf("second page: %+v, %v", two, err)
		}
		var none client.DeadLetterList
		env.raw(t, "GET", "/v1/dead-letters?workflow=other", "").decode(t, 200, &none)
		if len(none.DeadLetters) != 0 {
			t.Fatalf("workflow=other: %+v", none)
		}
		env.raw(t, "GET", "/v1/dead-letters?limit=-1", "").problem(t, 400, api.CodeInvalidParameter)

		env.healed.Store(true)
		st, err := c.RetryDeadLetter(ctx, f2, "charge")
		if err != nil || st.Step != "charge" || st.Status == "dead" {
			t.Fatalf("retry dead letter = %+v, %v", st, err)
		}
		env.waitStatus(t, f2, "succeeded")

		if err := c.DiscardDeadLetter(ctx, f3, "charge"); err != nil {
			t.Fatalf("discard: %v", err)
		}
		d, err := c.GetRun(ctx, f3)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range d.Steps {
			if s.Step == "charge" && s.Status != "cancelled" {
				t.Fatalf("discarded step is %s, want cancelled", s.Status)
			}
		}
		p := env.raw(t, "DELETE", "/v1/dead-letters/"+f3+"/charge", "").problem(t, 409, api.CodeConflict)
		if p.RunID != f3 {
			t.Fatalf("discard twice: run_id %q", p.RunID)
		}
		env.raw(t, "POST", "/v1/dead-letters/"+f3+"/charge/retry", "").problem(t, 409, api.CodeRetryRefused)
		env.raw(t, "POST", "/v1/dead-letters/"+f3+"/nostep/retry", "").problem(t, 404, api.CodeStepNotFound)
		env.raw(t, "DELETE", "/v1/dead-letters/"+f3+"/9x", "").problem(t, 400, api.CodeInvalidName)
		env.raw(t, "DELETE", "/v1/dead-letters/0190a0b0-0000-7000-8000-000000000000/charge", "").problem(t, 404, api.CodeRunNotFound)
		err = c.DiscardDeadLetter(ctx, f3, "nostep")
		problemOf(t, err, 404, api.CodeStepNotFound)
		_, err = c.RetryDeadLetter(ctx, f3, "charge")
		problemOf(t, err, 409, api.CodeRetryRefused)

		page, err = c.ListDeadLetters(ctx, client.DeadLetterFilter{})
		if err != nil || len(page.DeadLetters) != 0 {
			t.Fatalf("dead letters at the end: %+v, %v", page, err)
		}
	})
}

func TestSchedules(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{engine: func(c *engine.Config) { c.ScheduleInterval = -1 }})
		ctx := context.Background()
		c := env.anon
		if _, err := env.Store.ScheduleUpsert(ctx, persistence.Schedule{
			Name: "nightly", Spec: "0 3 * * *", Workflow: "order", Input: []byte(`{"batch":true}`),
			Overlap: persistence.OverlapAllow, CatchUp: persistence.CatchUpNone,
			CreatedAt: env.Clock.Now(), UpdatedAt: env.Clock.Now(),
		}); err != nil {
			t.Fatal(err)
		}
		list, err := c.ListSchedules(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("schedules = %+v, %v", list, err)
		}
		sc := list[0]
		if sc.Name != "nightly" || sc.Paused || len(sc.Next) == 0 || sc.Next[0].Hour() != 3 || string(sc.Input) != `{"batch":true}` || len(sc.LastRuns) != 0 {
			t.Fatalf("schedule %+v", sc)
		}
		id, err := c.TriggerSchedule(ctx, "nightly")
		if err != nil || id == "" {
			t.Fatalf("trigger schedule = %q, %v", id, err)
		}
		d := env.waitStatus(t, id, "succeeded")
		if string(d.Run.Input) != `{"batch":true}` || d.Run.Schedule != "nightly" {
			t.Fatalf("scheduled run %+v", d.Run)
		}
		env.Clock.Advance(time.Second)
		r := env.raw(t, "POST", "/v1/schedules/nightly/trigger", "")
		var tr client.ScheduleTriggerResult
		r.decode(t, http.StatusCreated, &tr)
		if r.header.Get("Location") != "/v1/runs/"+tr.RunID || tr.Schedule != "nightly" {
			t.Fatalf("trigger: %+v, Location %q", tr, r.header.Get("Location"))
		}
		paused, err := c.PauseSchedule(ctx, "nightly")
		if err != nil || !paused.Paused || len(paused.Next) != 0 {
			t.Fatalf("pause = %+v, %v", paused, err)
		}
		resumed, err := c.ResumeSchedule(ctx, "nightly")
		if err != nil || resumed.Paused || len(resumed.Next) == 0 {
			t.Fatalf("resume = %+v, %v", resumed, err)
		}
		list, err = c.ListSchedules(ctx)
		if err != nil || len(list[0].LastRuns) != 2 || list[0].LastRuns[0].RunID == "" {
			t.Fatalf("schedules after two triggers: %+v, %v", list, err)
		}
		for _, action := range []string{"pause", "resume", "trigger"} {
			env.raw(t, "POST", "/v1/schedules/nope/"+action, "").problem(t, 404, api.CodeScheduleNotFound)
			env.raw(t, "POST", "/v1/schedules/9x/"+action, "").problem(t, 400, api.CodeInvalidName)
		}
		_, err = c.PauseSchedule(ctx, "nope")
		problemOf(t, err, 404, api.CodeScheduleNotFound)
		env.raw(t, "GET", "/v1/schedules?x=1", "").problem(t, 400, api.CodeInvalidParameter)

		// A disabled schedule cannot be triggered: 409, not a 500.
		disabled := true
		if _, err := env.Store.ScheduleUpdate(ctx, persistence.ScheduleUpdateParams{Name: "nightly", Disabled: &disabled, Now: env.Clock.Now()}); err != nil {
			t.Fatal(err)
		}
		before := countRuns(t, env)
		p := env.raw(t, "POST", "/v1/schedules/nightly/trigger", "").problem(t, http.StatusConflict, api.CodeScheduleDisabled)
		if !strings.Contains(p.Detail, "nightly") || !strings.Contains(p.Detail, "disabled") {
			t.Fatalf("detail %q", p.Detail)
		}
		_, err = c.TriggerSchedule(ctx, "nightly")
		if problemOf(t, err, http.StatusConflict, client.CodeScheduleDisabled); !client.IsConflict(err) {
			t.Fatalf("IsConflict(%v) = false", err)
		}
		if after := countRuns(t, env); after != before {
			t.Fatalf("%d runs after triggering a disabled schedule, want %d", after, before)
		}
		if strings.Contains(env.logs.String(), "level=ERROR") {
			t.Fatalf("a refused trigger logged an error:\n%s", env.logs.String())
		}
	})
}

func TestQueues(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		// No workers: the first step waits, ready, in the default queue.
		env := newAPIEnv(t, b, envOptions{engine: func(c *engine.Config) { c.NoWorkers = true }})
		ctx := context.Background()
		id := triggerOrder(t, env, `{}`, "")
		env.Clock.Advance(5 * time.Second)
		qs, err := env.anon.ListQueues(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]client.Queue{}
		var names []string
		for _, q := range qs {
			got[q.Name] = q
			names = append(names, q.Name)
		}
		if strings.Join(names, ",") != "default,shipping" {
			t.Fatalf("queues %v, want default,shipping", names)
		}
		dq := got["default"]
		if dq.Ready != 1 || dq.OldestReadyTask != id+"/reserve/1" || dq.OldestReadyAgeSeconds < 5 || dq.OldestReadyAgeSeconds > 6 {
			t.Fatalf("default queue %+v, want 1 ready task, reserve of %s, 5 s old", dq, id)
		}
		if sq := got["shipping"]; sq.Ready != 0 || sq.Delayed != 0 || sq.Leased != 0 || sq.OldestReadyAgeSeconds != 0 {
			t.Fatalf("shipping queue %+v, want empty", sq)
		}
	})
}

func TestHealth(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{keys: true})
		ctx := context.Background()
		h, err := env.anon.Healthz(ctx)
		if err != nil || h.Status != "ok" {
			t.Fatalf("healthz = %+v, %v", h, err)
		}
		h, err = env.anon.Readyz(ctx)
		if err != nil || h.Status != "ok" || h.Checks["store"] != "ok" || h.Checks["redis"] != "ok" {
			t.Fatalf("readyz = %+v, %v", h, err)
		}
		spec, err := env.anon.OpenAPI(ctx)
		if err != nil || string(spec) != string(api.OpenAPI()) {
			t.Fatalf("openapi.yaml: %d bytes, %v", len(spec), err)
		}
		r := env.raw(t, "GET", "/openapi.yaml", "")
		if r.status != 200 || r.header.Get("Content-Type") != "application/yaml" {
			t.Fatalf("openapi.yaml: %d %q", r.status, r.header.Get("Content-Type"))
		}
		env.raw(t, "GET", "/v2/nothing", "").problem(t, 404, api.CodeNotFound)
		r = env.raw(t, "DELETE", "/healthz", "")
		r.problem(t, 405, api.CodeMethodNotAllowed)
		if r.header.Get("Allow") != "GET, HEAD" {
			t.Fatalf("Allow %q", r.header.Get("Allow"))
		}
	})
}

func TestReadyzNamesTheFailedDependency(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{keys: true})
	env.Miniredis.Close()
	h, err := env.anon.Readyz(context.Background())
	p := problemOf(t, err, 503, "unavailable")
	if h.Status != "unavailable" || h.Checks["redis"] == "ok" || h.Checks["store"] != "ok" || !strings.Contains(p.Detail, "redis") {
		t.Fatalf("readyz with Redis down = %+v, %+v", h, p)
	}
	if !strings.Contains(env.logs.String(), "dependency=redis") {
		t.Fatalf("the cause is not logged: %s", env.logs.String())
	}
}

// TestServerErrors: a stopping engine answers 503, a store that fails
// answers 500 without its cause (which is logged), and /readyz names the
// store.
func TestServerErrors(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	ctx := context.Background()
	id := triggerOrder(t, env, `{}`, "")
	env.waitStatus(t, id, "succeeded")
	if err := env.Engine.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	env.raw(t, "POST", "/v1/workflows/order/runs", `{}`).problem(t, 503, api.CodeUnavailable)
	_, _, err := env.anon.Trigger(ctx, "order", client.TriggerRequest{})
	problemOf(t, err, 503, api.CodeUnavailable)

	if err := env.Store.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
	p := env.raw(t, "GET", "/v1/runs/"+id, "").problem(t, 500, api.CodeInternal)
	if strings.Contains(p.Detail, "closed") {
		t.Fatalf("the problem shows the cause: %q", p.Detail)
	}
	_, err = env.anon.ListRuns(ctx, client.RunFilter{})
	problemOf(t, err, 500, api.CodeInternal)
	if !strings.Contains(env.logs.String(), "closed") {
		t.Fatalf("the cause is not logged:\n%s", env.logs.String())
	}
	h, err := env.anon.Readyz(ctx)
	problemOf(t, err, 503, "unavailable")
	if h.Checks["store"] == "ok" {
		t.Fatalf("readyz with the store closed: %+v", h)
	}
}

// TestBodyLimitIsConfigurable: Options.MaxBodyBytes replaces the 1 MiB
// default.
func TestBodyLimitIsConfigurable(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{configure: func(o *api.Options) { o.MaxBodyBytes = 100 }})
	before := countRuns(t, env)
	p := env.raw(t, "POST", "/v1/workflows/order/runs", `{"input":"`+strings.Repeat("x", 100)+`"}`).problem(t, 413, api.CodeBodyTooLarge)
	if !strings.Contains(p.Detail, "100 bytes") {
		t.Fatalf("413 detail %q does not name the limit", p.Detail)
	}
	triggerOrder(t, env, `"`+strings.Repeat("x", 50)+`"`, "")
	if after := countRuns(t, env); after != before+1 {
		t.Fatalf("runs %d -> %d, want one more", before, after)
	}
}
