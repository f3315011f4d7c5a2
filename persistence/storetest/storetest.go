package storetest

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/dagflow/dagflow/persistence"
)

// Option adds a hook to Run.
type Option func(*options)

type options struct {
	schema  func(t *testing.T, s persistence.Store) string
	beginTx func(ctx context.Context, s persistence.Store) (*sql.Tx, error)
}

// WithSchemaDump lets the suite check that hostile input leaves the schema
// unchanged: dump returns a description of every table (e.g. SHOW CREATE
// TABLE of each).
func WithSchemaDump(dump func(t *testing.T, s persistence.Store) string) Option {
	return func(o *options) { o.schema = dump }
}

// WithBeginTx lets the suite test persistence.TxStore: begin starts a
// transaction on the store's database.
func WithBeginTx(begin func(ctx context.Context, s persistence.Store) (*sql.Tx, error)) Option {
	return func(o *options) { o.beginTx = begin }
}

type suite struct {
	newStore func(t *testing.T) persistence.Store
	opts     options
}

// Run runs the conformance suite against stores made by newStore. newStore
// must return an empty, migrated store private to t (and close it when t
// ends).
func Run(t *testing.T, newStore func(t *testing.T) persistence.Store, opts ...Option) {
	s := &suite{newStore: newStore}
	for _, o := range opts {
		o(&s.opts)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, st persistence.Store)
	}{
		{"RunCreateGet", s.testRunCreateGet},
		{"RunCreateDelayedStart", s.testRunCreateDelayed},
		{"RunCreateIdempotent", s.testRunCreateIdempotent},
		{"RunCreateValidation", s.testRunCreateValidation},
		{"RunList", s.testRunList},
		{"RunResolve", s.testRunResolve},
		{"RunListNoPayloads", s.testRunListNoPayloads},
		{"RunTransition", s.testRunTransition},
		{"RunDeleteFinished", s.testRunDeleteFinished},
		{"RunDeleteFinishedEvents", s.testRunDeleteFinishedEvents},
		{"Leases", s.testLeases},
		{"ConcurrentLeases", s.testConcurrentLeases},
		{"RunCreateTx", s.testRunCreateTx},
		{"StepClaim", s.testStepClaim},
		{"StepClaimRunNotRunning", s.testStepClaimRunNotRunning},
		{"StepClaimRefusals", s.testClaimRefusals},
		{"StepClaimStartsDueRun", s.testClaimStartsDueRun},
		{"StepClaimUnhandled", s.testClaimUnhandled},
		{"StepClaimManyUnhandled", s.testClaimManyUnhandled},
		{"StepCompleteReleaseClaimUnhandled", s.testReleaseClaimUnhandled},
		{"ListDueByWorkflow", s.testListDueByWorkflow},
		{"StoreID", s.testStoreID},
		{"Nodes", s.testNodes},
		{"Now", s.testNow},
		{"Definitions", s.testDefinitions},
		{"ConcurrentDefinitions", s.testConcurrentDefinitions},
		{"APIKeys", s.testAPIKeys},
		{"RunDefinition", s.testRunDefinition},
		{"RunListByKey", s.testRunListByKey},
		{"ChangeFeed", s.testChangeFeed},
		{"StepTakeoverAndStaleFence", s.testTakeover},
		{"StepHeartbeat", s.testHeartbeat},
		{"StepCompleteReleasesDependents", s.testCompleteReleases},
		{"StepCompleteSkipped", s.testCompleteSkipped},
		{"StepCompletePayload", s.testCompletePayload},
		{"StepFailRetryDead", s.testFailRetryDead},
		{"StepFailDeadRunStatus", s.testFailDeadRunStatus},
		{"RunReopen", s.testRunReopen},
		{"RunRetryFailed", s.testRunRetryFailed},
		{"RunRetryCompensated", s.testRunRetryCompensated},
		{"RunRerunFromStep", s.testRunRerunFromStep},
		{"StepSkip", s.testStepSkip},
		{"Compensation", s.testCompensation},
		{"StepTransition", s.testStepTransition},
		{"ReconcilerLists", s.testReconcilerLists},
		{"StepListDeadPaging", s.testListDeadPaging},
		{"Schedules", s.testSchedules},
		{"ScheduleRuntime", s.testScheduleRuntime},
		{"ScheduleValidation", s.testScheduleValidation},
		{"HostileInput", s.testHostileInput},
		{"ConcurrentClaim", s.testConcurrentClaim},
		{"ConcurrentIdempotentCreate", s.testConcurrentCreate},
		{"ConcurrentJoinRelease", s.testConcurrentJoin},
		{"ConcurrentRunFinish", s.testConcurrentFinish},
		{"StepClaimMany", s.testClaimMany},
		{"StepClaimReads", s.testClaimReads},
		{"StepCompleteMany", s.testCompleteMany},
		{"StepCompleteManyWritesEachRow", s.testCompleteManyRows},
		{"ConcurrentCompleteMany", s.testConcurrentCompleteMany},
		{"StepCompleteClaimsReleased", s.testCompleteClaimsReleased},
		{"RunCreateMany", s.testRunCreateMany},
		{"RunCreateManyClaimsRoots", s.testRunCreateClaimsRoots},
		{"AttemptHistory", s.testAttemptHistory},
		{"HeldAttempts", s.testHeldAttempts},
		{"ReleaseLeases", s.testReleaseLeases},
		{"StepHandBack", s.testHandBack},
		{"EndedAttemptRows", s.testEndedAttemptRows},
		{"BatchesOfLargePayloads", s.testLargeBatches},
		{"EventCreate", s.testEventCreate},
		{"EventCreateConcurrent", s.testEventCreateConcurrent},
		{"EventCreateTx", s.testEventCreateTx},
		{"EventPending", s.testEventPending},
		{"EventList", s.testEventList},
		{"ParkEventMatch", s.testParkEventMatch},
		{"ParkEventFirst", s.testParkEventFirst},
		{"CorrelationAliases", s.testCorrelationAliases},
		{"ParkTimeoutAndSignal", s.testParkTimeoutAndSignal},
		{"RunPriority", s.testRunPriority},
		{"RunPause", s.testRunPause},
		{"QueuePause", s.testQueuePause},
		{"SealedWalk", s.testSealedWalk},
		{"CodecProbe", s.testCodecProbe},
		{"ExactCorrelation", s.testExactCorrelation},
		{"ExactCorrelationLookback", s.testExactCorrelationLookback},
		{"ExactNames", s.testExactNames},
		{"ExactIdempotencyKeys", s.testExactIdempotencyKeys},
		{"ExactNodeTokens", s.testExactNodeTokens},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, s.newStore(t))
		})
	}
}

// t0 is the suite's clock origin: microsecond precision, UTC.
var t0 = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }
func ptr[T any](v T) *T            { return &v }

func newID(t testing.TB) string {
	t.Helper()
	id, err := uuid.NewV7()
	if err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

// specs builds step specs from "name:dep,dep" strings.
func specs(defs ...string) []persistence.StepSpec {
	var out []persistence.StepSpec
	for _, d := range defs {
		name, deps, _ := strings.Cut(d, ":")
		sp := persistence.StepSpec{Name: name, Queue: "q1", MaxAttempts: 3}
		if deps != "" {
			sp.Deps = strings.Split(deps, ",")
		}
		out = append(out, sp)
	}
	return out
}

func createRun(t *testing.T, st persistence.Store, workflow string, input string, steps ...string) persistence.RunCreateResult {
	t.Helper()
	var in []byte
	if input != "" {
		in = []byte(input)
	}
	res, err := st.RunCreate(ctx(t), persistence.RunCreateParams{
		ID: newID(t), Workflow: workflow, Version: 1, Input: in, Now: t0, Steps: specs(steps...),
	})
	if err != nil {
		t.Fatalf("RunCreate: %v", err)
	}
	return res
}

func claim(t *testing.T, st persistence.Store, runID, step, fence string, now time.Time, withOutputs ...string) persistence.StepClaimResult {
	t.Helper()
	res, err := st.StepClaim(ctx(t), persistence.StepClaimParams{
		RunID: runID, Step: step, Fence: fence, Worker: "w-" + fence, LeaseUntil: now.Add(time.Minute), Now: now,
		WithOutputs: withOutputs,
	})
	if err != nil {
		t.Fatalf("StepClaim(%s, fence %s): %v", step, fence, err)
	}
	return res
}

func complete(t *testing.T, st persistence.Store, runID, step, fence, output string, now time.Time) persistence.StepCompleteResult {
	t.Helper()
	var out []byte
	if output != "" {
		out = []byte(output)
	}
	res, err := st.StepComplete(ctx(t), persistence.StepCompleteParams{RunID: runID, Step: step, Fence: fence, Output: out, Now: now})
	if err != nil {
		t.Fatalf("StepComplete(%s): %v", step, err)
	}
	return res
}

func getStep(t *testing.T, st persistence.Store, runID, step string) persistence.StepRun {
	t.Helper()
	s, err := st.StepGet(ctx(t), runID, step)
	if err != nil {
		t.Fatalf("StepGet(%s): %v", step, err)
	}
	return s
}

func getRun(t *testing.T, st persistence.Store, runID string) persistence.Run {
	t.Helper()
	r, err := st.RunGet(ctx(t), runID)
	if err != nil {
		t.Fatalf("RunGet: %v", err)
	}
	return r
}

func names(steps []persistence.StepRun) []string {
	out := []string{}
	for _, s := range steps {
		out = append(out, s.Step)
	}
	return out
}

func statuses(t *testing.T, st persistence.Store, runID string) map[string]persistence.StepStatus {
	t.Helper()
	steps, err := st.StepList(ctx(t), runID)
	if err != nil {
		t.Fatalf("StepList: %v", err)
	}
	out := map[string]persistence.StepStatus{}
	for _, s := range steps {
		out[s.Step] = s.Status
	}
	return out
}

func wantStatuses(t *testing.T, st persistence.Store, runID string, want map[string]persistence.StepStatus) {
	t.Helper()
	if diff := cmp.Diff(want, statuses(t, st, runID)); diff != "" {
		t.Errorf("step statuses (-want +got):\n%s", diff)
	}
}
