package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// RotateCodec moves every payload under an old key to the current one,
// in batches, probe included: a dry run counts and writes nothing, a
// second run finds nothing left, a value no key opens is reported while
// the others are rotated, and afterwards a node with only the new key
// starts and reads every run.
func TestRotateCodec(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		old, dead, good := sealedUnder(t, b.opts(t), keyring(t, "k1"))
		ctx := context.Background()
		// One value under a key nobody has: it cannot be rotated.
		lost := keyring(t, "k9")
		bad, _ := lost.Encode(ctx, "error", []byte("lost"))
		raw, err := old.Store.StepGet(ctx, good, "a")
		if err != nil {
			t.Fatal(err)
		}
		if n, err := old.Store.SealedUpdate(ctx, persistence.SealedUpdateParams{Column: "step_runs.output",
			Writes: []persistence.SealedWrite{{Key: []string{good, "a"}, Old: raw.Output, New: bad}}}); err != nil || n != 1 {
			t.Fatalf("planting a value under k9: %d, %v", n, err)
		}
		env := enginetest.New(t, keyedNode(t, old, keyring(t, "k2", "k1"), func(c *engine.Config) { c.NoWorkers = true }))

		dry, err := env.Engine.RotateCodec(ctx, engine.RotateOptions{DryRun: true, BatchSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if probeKey(t, env.Store) != "k1" {
			t.Fatal("the dry run rotated the probe")
		}
		var batches int
		rep, err := env.Engine.RotateCodec(ctx, engine.RotateOptions{BatchSize: 1, Progress: func(engine.RotateColumn) { batches++ }})
		if err != nil {
			t.Fatal(err)
		}
		total := func(r engine.RotateReport) (rot, cur int) {
			for _, c := range r.Columns {
				rot, cur = rot+c.Rotated, cur+c.Current
			}
			return
		}
		dryRot, _ := total(dry)
		rot, _ := total(rep)
		if rot == 0 || rot != dryRot || batches < rot {
			t.Errorf("rotated %d values in %d batches, dry run counted %d: want the same, one batch per value at least", rot, batches, dryRot)
		}
		if rep.Failed() != 1 || len(rep.Failures) != 1 || rep.Failures[0].Column != "step_runs.output" ||
			strings.Join(rep.Failures[0].Key, "/") != good+"/a" || !strings.Contains(rep.Failures[0].Err, `"k9"`) {
			t.Errorf("failures %+v; want the k9 value of %s/a named", rep.Failures, good)
		}
		if id := probeKey(t, env.Store); id != "k2" {
			t.Errorf("probe under %q after the rotation, want k2", id)
		}
		again, err := env.Engine.RotateCodec(ctx, engine.RotateOptions{})
		if r, cur := total(again); err != nil || r != 0 || cur != rot {
			t.Errorf("second rotation: rotated %d, %d under k2 already (%v); want 0 and %d", r, cur, err, rot)
		}

		// k1 can go: a node with k2 alone starts and reads the dead run.
		k2 := enginetest.New(t, keyedNode(t, old, keyring(t, "k2"), func(c *engine.Config) { c.NoWorkers = true }))
		info, err := k2.Engine.Get(ctx, dead)
		if err != nil || info.Run.PayloadError != "" || !strings.Contains(string(info.Run.Input), "SECRET-1") {
			t.Errorf("Get with k2 alone: input %s, payload error %q, %v", info.Run.Input, info.Run.PayloadError, err)
		}
		if a, _ := info.Step("a"); a.Error != "refused order SECRET-1" || info.Attempts[0].Error != "refused order SECRET-1" {
			t.Errorf("Get with k2 alone: step %+v, attempts %+v", a, info.Attempts)
		}
		evs, err := k2.Engine.Events(ctx, engine.EventFilter{})
		if err != nil || len(evs.Events) != 1 || evs.Events[0].PayloadError != "" {
			t.Errorf("Events with k2 alone: %+v, %v", evs.Events, err)
		}
		if si, err := k2.Engine.GetSchedule(ctx, "sealed-nightly"); err != nil || !strings.Contains(string(si.Input), "SECRET-4") {
			t.Errorf("GetSchedule with k2 alone: input %s, %v", si.Input, err)
		}
	})
}

// Without a keyed codec there is nothing to rotate: ErrNotKeyed.
func TestRotateCodecNeedsKeys(t *testing.T) {
	env := enginetest.New(t, enginetest.Options{})
	if _, err := env.Engine.RotateCodec(context.Background(), engine.RotateOptions{}); !errors.Is(err, engine.ErrNotKeyed) {
		t.Errorf("RotateCodec without a codec: %v, want ErrNotKeyed", err)
	}
}
