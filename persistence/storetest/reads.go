package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// testClaimReads checks what a claimed step receives: the outputs of its
// upstream steps only (not of steps beside it), measured, and none when
// they and the run's input are over the claim's MaxRead (the step is
// claimed all the same).
func (s *suite) testClaimReads(t *testing.T, st persistence.Store) {
	c := ctx(t)
	const input = `{"in":1}`
	out := func(n int) string { return `"` + strings.Repeat("x", n-2) + `"` } // JSON of n bytes
	want := map[string][]byte{"a": []byte(out(100)), "b": []byte(out(200)), "c": []byte(out(300))}
	// j joins a, b and c; k follows j; x is beside them.
	newRun := func() string {
		id := createRun(t, st, "wf", input, "a", "b", "c", "x", "j:a,b,c", "k:j").Run.ID
		for _, n := range []string{"a", "b", "c", "x"} {
			o := out(1000)
			if w, ok := want[n]; ok {
				o = string(w)
			}
			complete(t, st, id, n, claim(t, st, id, n, "f"+n, t0).Step.Fence, o, at(time.Second))
		}
		return id
	}
	claimMany := func(id, step string, maxRead int64) persistence.StepClaimResult {
		t.Helper()
		outs, err := st.StepClaimMany(c, persistence.StepClaimManyParams{
			Items: []persistence.StepClaimItem{{RunID: id, Step: step}},
			Fence: "fm-" + step, Worker: "w", LeaseUntil: at(time.Minute), Now: at(2 * time.Second), MaxRead: maxRead,
		})
		if err != nil || outs[0].Err != nil {
			t.Fatalf("claim %s: %v %v", step, err, outs[0].Err)
		}
		return outs[0].Result
	}
	const total = int64(len(input)) + 600

	// Within the bound (exactly at it): the upstream outputs, not x's.
	id := newRun()
	res := claimMany(id, "j", total)
	if diff := cmp.Diff(want, res.Outputs); diff != "" {
		t.Errorf("j's outputs (-want +got):\n%s", diff)
	}
	if res.OutputBytes != 600 || res.OutputCount != 3 || res.OverMaxRead {
		t.Errorf("j: OutputBytes %d, OutputCount %d, OverMaxRead %v; want 600, 3, false", res.OutputBytes, res.OutputCount, res.OverMaxRead)
	}
	// k after j reads j's output and those upstream of j, not x's; it
	// sees every upstream status.
	complete(t, st, id, "j", "fm-j", out(50), at(3*time.Second))
	res = claimMany(id, "k", 0)
	wantK := map[string][]byte{"j": []byte(out(50)), "a": want["a"], "b": want["b"], "c": want["c"]}
	if diff := cmp.Diff(wantK, res.Outputs); diff != "" || res.OutputBytes != 650 {
		t.Errorf("k's outputs (-want +got):\n%s; OutputBytes %d, want 650", diff, res.OutputBytes)
	}
	if len(res.Upstream) != 4 {
		t.Errorf("k's upstream statuses = %v, want a, b, c and j", res.Upstream)
	}

	// One byte over: measured, not loaded, and claimed.
	id = newRun()
	res = claimMany(id, "j", total-1)
	if res.Outputs != nil || !res.OverMaxRead || res.OutputBytes != 600 || res.OutputCount != 3 {
		t.Errorf("j over the bound: Outputs %d, OverMaxRead %v, OutputBytes %d, OutputCount %d; want none, true, 600, 3",
			len(res.Outputs), res.OverMaxRead, res.OutputBytes, res.OutputCount)
	}
	if res.Step.Status != persistence.StepRunning || res.Step.Fence != "fm-j" {
		t.Errorf("j over the bound is %s with fence %q; want running, claimed", res.Step.Status, res.Step.Fence)
	}

	// StepClaim reads the named steps, within its bound.
	id = newRun()
	cl, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "j", Fence: "fs", Worker: "w",
		LeaseUntil: at(time.Minute), Now: at(2 * time.Second), WithOutputs: []string{"a", "x"}, MaxRead: int64(len(input)) + 1100})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]byte{"a": want["a"], "x": []byte(out(1000))}, cl.Outputs); diff != "" || cl.OutputBytes != 1100 {
		t.Errorf("StepClaim outputs (-want +got):\n%s; OutputBytes %d, want 1100", diff, cl.OutputBytes)
	}

	// A claim at release: within the bound, the completed dependency's
	// output comes from the batch itself, the others from the store.
	for _, over := range []bool{false, true} {
		id := createRun(t, st, "wf", input, "a", "b", "c", "j:a,b,c").Run.ID
		for _, n := range []string{"a", "b"} {
			complete(t, st, id, n, claim(t, st, id, n, "f"+n, t0).Step.Fence, string(want[n]), at(time.Second))
		}
		fc := claim(t, st, id, "c", "fc", t0).Step.Fence
		maxRead := total
		if over {
			maxRead--
		}
		outs, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{
			Items:         []persistence.StepCompleteParams{{RunID: id, Step: "c", Fence: fc, Output: want["c"], Now: at(2 * time.Second)}},
			ClaimReleased: &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 1, Fence: "fr", Worker: "w", LeaseUntil: at(time.Minute), MaxRead: maxRead},
		})
		if err != nil || outs[0].Err != nil {
			t.Fatalf("complete c: %v %v", err, outs[0].Err)
		}
		if len(outs[0].Result.Claimed) != 1 {
			t.Fatalf("claimed at release: %+v, want j", outs[0].Result.Claimed)
		}
		got := outs[0].Result.Claimed[0]
		if got.OutputBytes != 600 || got.OutputCount != 3 || got.OverMaxRead != over {
			t.Errorf("over=%v: j claimed at release: OutputBytes %d, OutputCount %d, OverMaxRead %v", over, got.OutputBytes, got.OutputCount, got.OverMaxRead)
		}
		wantOut := want
		if over {
			wantOut = nil
		}
		if diff := cmp.Diff(wantOut, got.Outputs); diff != "" {
			t.Errorf("over=%v: j's outputs at release (-want +got):\n%s", over, diff)
		}
		// The completed step's output was written whole.
		sc, err := st.StepGet(c, id, "c")
		if err != nil || string(sc.Output) != string(want["c"]) {
			t.Errorf("c's stored output = %q, %v; want %q", sc.Output, err, want["c"])
		}
	}
}
