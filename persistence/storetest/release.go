package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dagflow/dagflow/persistence"
)

// testReleaseLeases: StepReleaseLeases ends the unexpired leases of the
// named workers only, on running steps and on compensations (whose worker
// is their attempt's), fenced: once another worker claimed the step, the
// dead worker's name releases nothing and its outcome is refused.
func (s *suite) testReleaseLeases(t *testing.T, st persistence.Store) {
	c := ctx(t)
	release := func(now time.Time, workers ...string) []string {
		t.Helper()
		out, err := st.StepReleaseLeases(c, persistence.StepReleaseLeasesParams{Workers: workers, Now: now})
		if err != nil {
			t.Fatalf("StepReleaseLeases(%v): %v", workers, err)
		}
		var got []string
		for _, r := range out {
			if r.LeaseExpiresAt == nil || !r.LeaseExpiresAt.Equal(now) {
				t.Errorf("released %s/%s: lease %v, want %v", r.RunID, r.Step, r.LeaseExpiresAt, now)
			}
			got = append(got, r.Step+":"+string(r.Status))
		}
		return got
	}
	r := createRun(t, st, "wf", "", "a", "b", "c")
	id := r.Run.ID
	claim(t, st, id, "a", "fa", at(time.Second))
	claim(t, st, id, "b", "fb", at(time.Second))
	claim(t, st, id, "c", "fc", at(time.Second))
	complete(t, st, id, "c", "fc", `{}`, at(2*time.Second))

	if got := release(at(10*time.Second), "w-none"); len(got) != 0 {
		t.Errorf("an unknown worker's release freed %v", got)
	}
	if got := release(at(10*time.Second), "w-fa"); fmt.Sprint(got) != "[a:running]" {
		t.Errorf("w-fa's release freed %v, want a", got)
	}
	if a := getStep(t, st, id, "a"); a.LeaseExpiresAt == nil || !a.LeaseExpiresAt.Equal(at(10*time.Second)) || a.Fence != "fa" {
		t.Errorf("a after the release: lease %v fence %q; want the lease ended at 10s, the fence kept", a.LeaseExpiresAt, a.Fence)
	}
	if b := getStep(t, st, id, "b"); b.LeaseExpiresAt == nil || !b.LeaseExpiresAt.Equal(at(61*time.Second)) {
		t.Errorf("b's lease moved to %v; only w-fa's leases end", b.LeaseExpiresAt)
	}
	if got := release(at(11*time.Second), "w-fa"); len(got) != 0 {
		t.Errorf("an expired lease was released again: %v", got)
	}
	// Another worker takes a over; the dead worker's name no longer
	// reaches it and its outcome is refused.
	claim(t, st, id, "a", "fa2", at(12*time.Second))
	if got := release(at(13*time.Second), "w-fa"); len(got) != 0 {
		t.Errorf("the new holder's lease was released under the old worker's name: %v", got)
	}
	if _, err := st.StepComplete(c, persistence.StepCompleteParams{RunID: id, Step: "a", Fence: "fa", Now: at(14 * time.Second)}); !errors.Is(err, persistence.ErrFenceMismatch) {
		t.Errorf("the released worker's late completion: %v, want ErrFenceMismatch", err)
	}

	// A compensation's worker is its attempt's, not the forward one's.
	if _, err := st.StepFail(c, persistence.StepFailParams{RunID: id, Step: "b", Fence: "fb", Error: "dead",
		DeadRunStatus: persistence.RunCompensating, Now: at(15 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepTransition(c, persistence.StepTransitionParams{RunID: id, Steps: []string{"c"},
		From: []persistence.StepStatus{persistence.StepSucceeded}, To: persistence.StepCompensating, Now: at(16 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.StepClaim(c, persistence.StepClaimParams{RunID: id, Step: "c", Compensation: true, Fence: "cc", Worker: "w-cc",
		LeaseUntil: at(time.Hour), Now: at(17 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got := release(at(20*time.Second), "w-fc"); len(got) != 0 {
		t.Errorf("the forward worker's name released the compensation: %v", got)
	}
	if got := release(at(20*time.Second), "w-x", "w-cc"); fmt.Sprint(got) != "[c:compensating]" {
		t.Errorf("w-cc's release freed %v, want c's compensation", got)
	}

	for _, p := range []persistence.StepReleaseLeasesParams{
		{Now: at(time.Second)},
		{Workers: make([]string, 101), Now: at(time.Second)},
		{Workers: []string{""}, Now: at(time.Second)},
		{Workers: []string{"w"}},
	} {
		if _, err := st.StepReleaseLeases(c, p); err == nil {
			t.Errorf("StepReleaseLeases(%d workers, now %v) accepted", len(p.Workers), p.Now)
		}
	}
}
