package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/steps"
)

// fakeCodec encodes a payload as the JSON string "fake:<base64>" and
// fails the calls it is told to.
type fakeCodec struct {
	mu      sync.Mutex
	fail    map[string]int // "encode input", "decode output", ... -> calls left to fail
	nonJSON bool           // Encode returns bytes that are not JSON
}

func (c *fakeCodec) failing(op string, kind codec.Kind) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := op + " " + string(kind)
	if c.fail[k] > 0 {
		c.fail[k]--
		return true
	}
	return false
}

// failNext makes the next calls named in fail fail.
func (c *fakeCodec) failNext(fail map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = fail
}

func (c *fakeCodec) Encode(_ context.Context, kind codec.Kind, b []byte) ([]byte, error) {
	if c.failing("encode", kind) {
		return nil, errors.New("fake: encode refused")
	}
	if c.nonJSON {
		return []byte("fake:" + base64.StdEncoding.EncodeToString(b)), nil
	}
	return []byte(`"fake:` + base64.StdEncoding.EncodeToString(b) + `"`), nil
}

func (c *fakeCodec) Decode(_ context.Context, kind codec.Kind, b []byte) ([]byte, error) {
	if c.failing("decode", kind) {
		return nil, errors.New("fake: decode refused")
	}
	rest, ok := bytes.CutPrefix(b, []byte(`"fake:`))
	if !ok {
		return b, nil
	}
	return base64.StdEncoding.DecodeString(strings.TrimSuffix(string(rest), `"`))
}

// codecEnv starts an engine with c and a one-step workflow "one" whose
// handler returns {"v":"out"}, or fails with herr when it is set.
func codecEnv(t *testing.T, c codec.Codec, herr error) *enginetest.Env {
	t.Helper()
	h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		if herr != nil {
			return nil, herr
		}
		return json.RawMessage(`{"v":"out"}`), nil
	})
	wf, err := dag.New("one", dag.DefaultRetry(dag.RetryPolicy{MaxAttempts: 3, InitialBackoff: 1, Multiplier: 1})).Step("a", h).Build()
	if err != nil {
		t.Fatal(err)
	}
	return enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{wf}, Configure: func(cfg *engine.Config) { cfg.Codec = c }})
}

// A codec that cannot encode an input, or returns something that is not
// JSON, fails the Trigger with the reason; nothing is stored.
func TestCodecEncodeFailureFailsTrigger(t *testing.T) {
	c := &fakeCodec{}
	env := codecEnv(t, c, nil)
	c.failNext(map[string]int{"encode input": 1}) // after Start, which encodes the store's probe
	ctx := context.Background()
	_, err := env.Engine.Trigger(ctx, "one", map[string]int{"a": 1})
	if err == nil || err.Error() != `engine: workflow "one": encoding the input: fake: encode refused` {
		t.Errorf("encode refused: err = %v", err)
	}
	c.nonJSON = true
	_, err = env.Engine.Trigger(ctx, "one", map[string]int{"a": 1})
	if err == nil || !strings.HasSuffix(err.Error(), "encoding the input: the codec returned a payload that is not valid JSON") {
		t.Errorf("codec returned non-JSON: err = %v", err)
	}
	page, err := env.Store.RunList(ctx, persistence.RunListParams{})
	if err != nil || len(page.Runs) != 0 {
		t.Errorf("refused triggers stored %d runs (%v)", len(page.Runs), err)
	}
}

// A claim whose input cannot be decoded, or whose output cannot be
// encoded, fails the attempt with the reason, and the step is retried.
func TestCodecFailureInAStepIsRetried(t *testing.T) {
	c := &fakeCodec{}
	env := codecEnv(t, c, nil)
	c.failNext(map[string]int{"decode input": 1, "encode output": 1})
	id := env.Trigger(t, "one", map[string]int{"a": 1})
	// Wait on the store, not on Get: Get decodes the input too and would
	// take the one failure meant for the claim.
	waitStored(t, env, id)
	info := env.Wait(t, id)
	env.AssertRun(t, info, persistence.RunSucceeded)
	var errs []string
	for _, a := range info.Attempts {
		errs = append(errs, a.Error)
	}
	want := []string{
		"engine: run " + id + ": decoding the input: fake: decode refused",
		`step "a": encoding the output: fake: encode refused`,
		"",
	}
	if strings.Join(errs, "|") != strings.Join(want, "|") {
		t.Errorf("attempt errors:\n got %q\nwant %q", errs, want)
	}
	if s, _ := info.Step("a"); string(s.Output) != `{"v":"out"}` {
		t.Errorf("output %s, want it decoded", s.Output)
	}
	raw, err := env.Store.StepGet(context.Background(), id, "a")
	if err != nil || !strings.HasPrefix(string(raw.Output), `"fake:`) {
		t.Errorf("stored output %s (%v), want it encoded", raw.Output, err)
	}
}

// waitStored waits for a run to finish by reading the store, without
// decoding anything.
func waitStored(t *testing.T, env *enginetest.Env, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		run, err := env.Store.RunGet(context.Background(), id)
		if err != nil {
			t.Fatalf("get run %s: %v", id, err)
		}
		if run.Status.Terminal() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after 30s", id, run.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An error text the codec cannot encode is replaced by one that says so,
// never stored in clear; a long one is cut before it is encoded, so that
// the store never cuts an envelope.
func TestCodecErrorTexts(t *testing.T) {
	c := &fakeCodec{fail: map[string]int{"encode error": 2}}
	secret := "card 4111 declined"
	env := codecEnv(t, c, steps.Permanent(errors.New(secret)))
	ctx := context.Background()
	id := env.Trigger(t, "one", nil)
	info := env.Wait(t, id)
	s, _ := info.Step("a")
	if s.Status != persistence.StepDead || s.Error != "(error text not stored: encoding it failed: fake: encode refused)" {
		t.Errorf("step: %s %q, want dead with the encoding failure", s.Status, s.Error)
	}
	if info.Run.Error != "(error text not stored: encoding it failed: fake: encode refused)" {
		t.Errorf("run error %q", info.Run.Error)
	}

	long := strings.Repeat("é", 40<<10) // 80 KiB of two-byte runes
	env2 := codecEnv(t, &fakeCodec{}, steps.Permanent(errors.New(long)))
	id2 := env2.Trigger(t, "one", nil)
	s2, _ := env2.Wait(t, id2).Step("a")
	if len(s2.Error) == 0 || len(s2.Error) > 32<<10 || !strings.HasPrefix(long, s2.Error) {
		t.Errorf("long error: %d bytes decoded, want a prefix of the text of at most 32 KiB", len(s2.Error))
	}

	// A payload the codec cannot decode is left out of what Get shows,
	// and PayloadError says why; the call itself succeeds.
	c.fail = map[string]int{"decode error": 1}
	info, err := env.Engine.Get(ctx, id)
	if err != nil || info.Run.Error != "" || info.Run.PayloadError != "decoding the error: fake: decode refused" {
		t.Errorf("Get with an undecodable error: error %q, payload error %q, err = %v", info.Run.Error, info.Run.PayloadError, err)
	}
}

// When a compensation dead-letters, the run's error (encoded) gains the
// failed compensations: it is decoded, added to and encoded again.
func TestCodecCompensationFailureRunError(t *testing.T) {
	fail := func(msg string) steps.Handler {
		return steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
			return nil, steps.Permanent(errors.New(msg))
		})
	}
	ok := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
	wf, err := dag.New("undo").Step("a", ok, dag.Compensate(fail("undo a: secret"))).Step("b", fail("b: secret"), dag.After("a")).Build()
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{wf}, Configure: func(cfg *engine.Config) { cfg.Codec = &fakeCodec{} }})
	id := env.Trigger(t, "undo", nil)
	info := env.Wait(t, id)
	env.AssertRun(t, info, persistence.RunFailed)
	if want := `step "b" dead after 1 attempt(s): b: secret; compensation failed for step(s) a`; info.Run.Error != want {
		t.Errorf("run error %q, want %q", info.Run.Error, want)
	}
	raw, err := env.Store.RunGet(context.Background(), id)
	if err != nil || strings.Contains(raw.Error, "secret") {
		t.Errorf("stored run error %q (%v), want it encoded", raw.Error, err)
	}
}

// The store's size limit applies to the encoded payload; its refusal
// says how large the payload was before the codec made it larger.
func TestCodecTooLargeSaysWhatTheCodecMade(t *testing.T) {
	big := strings.Repeat("x", 900_000)
	out, _ := json.Marshal(big)
	h := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return out, nil })
	wf, err := dag.New("big").Step("a", h).Build()
	if err != nil {
		t.Fatal(err)
	}
	env := enginetest.New(t, enginetest.Options{Workflows: []*dag.Workflow{wf}, Configure: func(cfg *engine.Config) { cfg.Codec = &fakeCodec{} }})
	_, err = env.Engine.Trigger(context.Background(), "big", big)
	if !errors.Is(err, persistence.ErrTooLarge) || !strings.Contains(err.Error(), "(the codec encoded the input's 900002 bytes as 1200011;") {
		t.Errorf("input: err = %v, want ErrTooLarge saying what the codec made of 900002 bytes", err)
	}
	id := env.Trigger(t, "big", nil)
	s, _ := env.Wait(t, id).Step("a")
	if s.Status != persistence.StepDead || !strings.Contains(s.Error, "(the codec encoded the output's 900002 bytes as 1200011;") {
		t.Errorf("output: step %s %q, want dead saying what the codec made of 900002 bytes", s.Status, s.Error)
	}
}
