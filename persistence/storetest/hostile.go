package storetest

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// hostile are strings that break string-built SQL, lossy encodings or
// C-string handling.
var hostile = map[string]string{
	"injection":   `'; DROP TABLE workflow_runs; --`,
	"quotes":      `"double" 'single' ` + "`back`",
	"backslashes": `\ \\ \' \" \n \x00 \%`,
	"nul":         "before\x00after",
	"utf8-4byte":  "emoji 😀 clef 𝄞 han 𠜎",
	"10KB":        strings.Repeat("ab'\\\"😀", 10<<10/9),
	"percent":     "100% _like_ %s",
	"newlines":    "line1\nline2\r\n\ttab",
}

func (s *suite) testHostileInput(t *testing.T, st persistence.Store) {
	c := ctx(t)
	var before string
	if s.opts.schema != nil {
		before = s.opts.schema(t, st)
	}
	for label, v := range hostile {
		// Names: always refused, never stored.
		for _, p := range []persistence.RunCreateParams{
			{ID: newID(t), Workflow: v, Now: t0},
			{ID: newID(t), Workflow: "wf", Now: t0, Steps: []persistence.StepSpec{{Name: v}}},
			{ID: newID(t), Workflow: "wf", Now: t0, Steps: []persistence.StepSpec{{Name: "a", Queue: v}}},
			{ID: v, Workflow: "wf", Now: t0},
			{ID: newID(t), Workflow: "wf", Schedule: v, Now: t0},
		} {
			if _, err := st.RunCreate(c, p); !errors.Is(err, persistence.ErrInvalid) {
				t.Errorf("%s: RunCreate(%q) = %v, want ErrInvalid", label, v[:min(len(v), 40)], err)
			}
		}
		if _, err := st.ScheduleUpsert(c, persistence.Schedule{Name: v, Spec: "* * * * *", Workflow: "wf"}); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("%s: schedule named %q = %v, want ErrInvalid", label, v[:min(len(v), 40)], err)
		}
		// Lookups by hostile names find nothing, harmlessly.
		if _, err := st.RunGet(c, v); !errors.Is(err, persistence.ErrRunNotFound) {
			t.Errorf("%s: RunGet = %v, want ErrRunNotFound", label, err)
		}
		if _, err := st.ScheduleGet(c, v); !errors.Is(err, persistence.ErrScheduleNotFound) {
			t.Errorf("%s: ScheduleGet = %v, want ErrScheduleNotFound", label, err)
		}

		// Inside JSON, every string round-trips byte-exact.
		input, err := json.Marshal(map[string]string{"v": v, label: v})
		if err != nil {
			t.Fatal(err)
		}
		id := newID(t)
		p := persistence.RunCreateParams{ID: id, Workflow: "wf", Input: input, Now: t0, Steps: specs("a"),
			Metadata: map[string]string{"m": v}}
		keyOK := !strings.Contains(v, "\x00") && len(v) <= 255
		if keyOK {
			p.IdempotencyKey = v
		}
		var metaOK = !strings.Contains(v, "\x00")
		if !metaOK {
			if _, err := st.RunCreate(c, p); !errors.Is(err, persistence.ErrInvalid) {
				t.Errorf("%s: metadata with NUL = %v, want ErrInvalid", label, err)
			}
			p.Metadata = nil
		}
		res, err := st.RunCreate(c, p)
		if err != nil {
			t.Errorf("%s: RunCreate: %v", label, err)
			continue
		}
		got := getRun(t, st, id)
		if string(got.Input) != string(input) {
			t.Errorf("%s: input did not round-trip", label)
		}
		if keyOK && got.IdempotencyKey != v {
			t.Errorf("%s: idempotency key = %q, want %q", label, got.IdempotencyKey, v)
		}
		if metaOK && got.Metadata["m"] != v {
			t.Errorf("%s: metadata did not round-trip", label)
		}
		if diff := cmp.Diff(res.Run, got); diff != "" {
			t.Errorf("%s: stored run differs (-created +stored):\n%s", label, diff)
		}
		if keyOK {
			again, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Input: input, IdempotencyKey: v, Now: t0, Steps: specs("a")})
			if err != nil || again.Created || again.Run.ID != id {
				t.Errorf("%s: repeat with the hostile key = %+v, %v; want the existing run", label, again.Run.ID, err)
			}
		}

		// Fences, workers, errors and outputs.
		fence := v
		if len(fence) > 128 {
			fence = fence[:128]
		}
		if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "a", Fence: fence, Worker: v[:min(len(v), 255)], LeaseUntil: at(time.Minute), Now: t0}); err != nil {
			if strings.Contains(v, "\x00") && errors.Is(err, persistence.ErrInvalid) {
				continue // refused fence or worker; nothing else to check
			}
			t.Errorf("%s: StepClaim: %v", label, err)
			continue
		}
		if got := getStep(t, st, id, "a"); got.Fence != fence {
			t.Errorf("%s: fence = %q, want %q", label, got.Fence, fence)
		}
		if err := st.StepHeartbeat(c, persistence.StepHeartbeatParams{RunID: id, Step: "a", Fence: fence + "x", LeaseUntil: at(time.Hour), Now: t0}); !errors.Is(err, persistence.ErrFenceMismatch) {
			t.Errorf("%s: near-miss fence heartbeat = %v, want ErrFenceMismatch", label, err)
		}
		retry := at(time.Second)
		if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "a", Fence: fence, Error: v, RetryAt: &retry, Now: t0}); err != nil {
			t.Errorf("%s: StepFail: %v", label, err)
			continue
		}
		if got := getStep(t, st, id, "a"); got.Error != v {
			t.Errorf("%s: step error did not round-trip (%d bytes, want %d)", label, len(got.Error), len(v))
		}
		atts, _ := st.AttemptList(c, id)
		if len(atts) != 1 || atts[0].Error != v || atts[0].Worker != v[:min(len(v), 255)] {
			t.Errorf("%s: attempt error or worker did not round-trip", label)
		}
		claim(t, st, id, "a", "f2", retry)
		complete(t, st, id, "a", "f2", string(input), at(2*time.Second))
		if got := getStep(t, st, id, "a"); string(got.Output) != string(input) {
			t.Errorf("%s: output did not round-trip", label)
		}
	}
	// Tick reasons (free text) round-trip, NUL included.
	labels := slices.Sorted(maps.Keys(hostile))
	for i, label := range labels {
		tk := persistence.ScheduleTick{Schedule: "s", Tick: at(time.Duration(i) * time.Hour), Outcome: persistence.TickSkipped, Reason: hostile[label], CreatedAt: t0}
		if err := st.ScheduleTickRecord(c, tk); err != nil {
			t.Errorf("%s: ScheduleTickRecord: %v", label, err)
		}
	}
	ticks, err := st.ScheduleTickList(c, persistence.ScheduleTickListParams{Name: "s", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, tk := range ticks {
		i := int(tk.Tick.Sub(t0) / time.Hour)
		if want := hostile[labels[i]]; tk.Reason != want {
			t.Errorf("%s: tick reason did not round-trip (%d bytes, want %d)", labels[i], len(tk.Reason), len(want))
		}
	}
	if len(ticks) != len(labels) {
		t.Errorf("%d ticks stored, want %d", len(ticks), len(labels))
	}
	// Hostile text in a schedule's spec and zone round-trips.
	spec := hostile["utf8-4byte"] + hostile["injection"]
	sc, err := st.ScheduleUpsert(c, persistence.Schedule{Name: "hostile", Spec: spec, TimeZone: hostile["quotes"], Workflow: "wf"})
	if err != nil || sc.Spec != spec || sc.TimeZone != hostile["quotes"] {
		t.Errorf("schedule with hostile spec = %+v, %v", sc, err)
	}

	if s.opts.schema != nil {
		after := s.opts.schema(t, st)
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("schema changed (-before +after):\n%s", diff)
		}
	}
}
