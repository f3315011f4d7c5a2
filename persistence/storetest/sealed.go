package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// testSealedWalk: SealedList pages every non-empty value of a sealed
// column by primary key (composite keys too), and SealedUpdate writes a
// value only where the row still holds the one read.
func (s *suite) testSealedWalk(t *testing.T, st persistence.Store) {
	c := ctx(t)
	cols := map[string]string{}
	for _, col := range st.SealedColumns() {
		cols[col.Name] = col.Kind
	}
	for name, kind := range map[string]string{"workflow_runs.input": "input", "step_runs.output": "output",
		"step_runs.error": "error", "step_attempts.error": "error", "events.payload": "input", "codec_probe.value": "input"} {
		if cols[name] != kind {
			t.Errorf("SealedColumns: %s has kind %q, want %q", name, cols[name], kind)
		}
	}
	var ids []string
	for i := range 5 {
		r := createRun(t, st, "wf", fmt.Sprintf(`"in-%d"`, i), "a", "b")
		ids = append(ids, r.Run.ID)
		claim(t, st, r.Run.ID, "a", "f"+r.Run.ID, at(time.Second))
		if _, err := st.StepFail(c, persistence.StepFailParams{RunID: r.Run.ID, Step: "a", Fence: "f" + r.Run.ID,
			Error: "sealed-err-" + r.Run.ID, Now: at(2 * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	createRun(t, st, "wf", "", "a") // no input: left out
	inputs := walkSealed(t, st, "workflow_runs.input", 2)
	if len(inputs) != 5 {
		t.Fatalf("workflow_runs.input: %d values, want 5: %v", len(inputs), inputs)
	}
	errs := walkSealed(t, st, "step_runs.error", 2)
	if len(errs) != 5 {
		t.Fatalf("step_runs.error: %d values, want 5 (one per failed step): %v", len(errs), errs)
	}
	for k, v := range errs {
		if !strings.HasSuffix(k, "/a") || v != "sealed-err-"+strings.TrimSuffix(k, "/a") {
			t.Errorf("step_runs.error %s = %q", k, v)
		}
	}
	if atts := walkSealed(t, st, "step_attempts.error", 2); len(atts) != 5 {
		t.Errorf("step_attempts.error: %d values, want 5: %v", len(atts), atts)
	}

	// Compare and set: a stale Old writes nothing.
	id := ids[0]
	n, err := st.SealedUpdate(c, persistence.SealedUpdateParams{Column: "step_runs.error", Writes: []persistence.SealedWrite{
		{Key: []string{id, "a"}, Old: []byte("sealed-err-" + id), New: []byte("resealed")},
		{Key: []string{ids[1], "a"}, Old: []byte("not what it holds"), New: []byte("resealed")},
	}})
	if err != nil || n != 1 {
		t.Fatalf("SealedUpdate = %d, %v; want 1 row written", n, err)
	}
	if got := getStep(t, st, id, "a").Error; got != "resealed" {
		t.Errorf("step error after the update = %q, want resealed", got)
	}
	if got := getStep(t, st, ids[1], "a").Error; got != "sealed-err-"+ids[1] {
		t.Errorf("step whose Old did not match = %q, want it unchanged", got)
	}
	n, err = st.SealedUpdate(c, persistence.SealedUpdateParams{Column: "workflow_runs.input", Writes: []persistence.SealedWrite{
		{Key: []string{id}, Old: []byte(`"in-0"`), New: []byte(`"in-0-resealed"`)}}})
	if err != nil || n != 1 || string(getRun(t, st, id).Input) != `"in-0-resealed"` {
		t.Errorf("SealedUpdate of an input = %d, %v; input %s", n, err, getRun(t, st, id).Input)
	}
	atts := walkSealed(t, st, "step_attempts.error", 0)
	for k, v := range atts {
		n, err := st.SealedUpdate(c, persistence.SealedUpdateParams{Column: "step_attempts.error", Writes: []persistence.SealedWrite{
			{Key: []string{k}, Old: []byte(v), New: []byte("att-resealed")}}})
		if err != nil || n != 1 {
			t.Errorf("SealedUpdate of attempt %s = %d, %v", k, n, err)
		}
		break
	}

	testSealedRefusals(t, st, id)
}

// testSealedRefusals: bad input to SealedList and SealedUpdate is
// refused, naming it.
func testSealedRefusals(t *testing.T, st persistence.Store, id string) {
	c := ctx(t)
	if _, err := st.SealedList(c, persistence.SealedListParams{Column: "schedules.spec"}); !errors.Is(err, persistence.ErrInvalid) ||
		!strings.Contains(err.Error(), "schedules.spec") {
		t.Errorf("SealedList of a column not sealed: %v", err)
	}
	if _, err := st.SealedList(c, persistence.SealedListParams{Column: "step_runs.error", Cursor: "nope"}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("SealedList with a bad cursor: %v", err)
	}
	if _, err := st.SealedUpdate(c, persistence.SealedUpdateParams{Column: "step_runs.error", Writes: []persistence.SealedWrite{
		{Key: []string{id}, Old: []byte("x"), New: []byte("y")}}}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("SealedUpdate with half a key: %v", err)
	}
	if _, err := st.SealedUpdate(c, persistence.SealedUpdateParams{Column: "step_attempts.error", Writes: []persistence.SealedWrite{
		{Key: []string{"x1"}, Old: []byte("x"), New: []byte("y")}}}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("SealedUpdate with a key that is not an attempt id: %v", err)
	}
}

// walkSealed reads every value of a sealed column, limit at a time, and
// returns them by key ("/"-joined); a key seen twice or out of order
// fails the test.
func walkSealed(t *testing.T, st persistence.Store, column string, limit int) map[string]string {
	t.Helper()
	out := map[string]string{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("%s: more than 100 pages: the cursor does not advance", column)
		}
		page, err := st.SealedList(ctx(t), persistence.SealedListParams{Column: column, Cursor: cursor, Limit: limit})
		if err != nil {
			t.Fatalf("SealedList(%s): %v", column, err)
		}
		for _, v := range page.Values {
			k := strings.Join(v.Key, "/")
			if _, dup := out[k]; dup {
				t.Fatalf("%s: row %s listed twice", column, k)
			}
			out[k] = string(v.Value)
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// testCodecProbe: the store has no probe until one is created; of
// concurrent creators one wins and all read the winner's; the probe is
// a sealed column, updated by compare and set.
func (s *suite) testCodecProbe(t *testing.T, st persistence.Store) {
	c := ctx(t)
	if p, err := st.CodecProbe(c, persistence.CodecProbeParams{}); err != nil || p != nil {
		t.Fatalf("CodecProbe of a new store = %q, %v; want none", p, err)
	}
	var wg sync.WaitGroup
	got := make([]string, 8)
	errs := make([]error, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := st.CodecProbe(c, persistence.CodecProbeParams{Create: []byte(fmt.Sprintf(`"probe-%d"`, i))})
			got[i], errs[i] = string(p), err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, p := range got {
		if p != got[0] || !strings.HasPrefix(p, `"probe-`) {
			t.Fatalf("concurrent creators read %q: want one winner's probe", got)
		}
	}
	vals := walkSealed(t, st, "codec_probe.value", 0)
	if len(vals) != 1 {
		t.Fatalf("codec_probe.value: %v, want one row", vals)
	}
	for k := range vals {
		n, err := st.SealedUpdate(c, persistence.SealedUpdateParams{Column: "codec_probe.value",
			Writes: []persistence.SealedWrite{{Key: []string{k}, Old: []byte(got[0]), New: []byte(`"probe-new"`)}}})
		if err != nil || n != 1 {
			t.Fatalf("SealedUpdate of the probe = %d, %v", n, err)
		}
	}
	if p, err := st.CodecProbe(c, persistence.CodecProbeParams{Create: []byte(`"other"`)}); err != nil || string(p) != `"probe-new"` {
		t.Errorf("CodecProbe after the update = %q, %v; want the updated probe, not a new one", p, err)
	}
}
