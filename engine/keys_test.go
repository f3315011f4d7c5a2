package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
)

// TestTriggerRefusesReservedKeys: every reserved prefix (the keys of the
// runs that children, events and schedule ticks start) is refused by
// Trigger and TriggerTx, with an error naming the prefix used and listing
// all of them; a whitespace-only key is refused too; nothing is created.
func TestTriggerRefusesReservedKeys(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		var calls sync.Map
		o := b.opts(t)
		o.Workflows = eventWorkflows(t, &calls)
		env := enginetest.New(t, o)
		ctx := context.Background()
		prefixes := engine.ReservedKeyPrefixes()
		for _, want := range []string{"child:", "event:", "schedule:"} {
			if !strings.Contains(fmt.Sprint(prefixes), want) {
				t.Fatalf("ReservedKeyPrefixes() = %q, want it to hold %q", prefixes, want)
			}
		}
		db, err := env.Engine.DB()
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{cron.Key("nightly", time.Unix(1_900_000_000, 0)), "schedule:nightly:manual:1"}
		for _, p := range prefixes {
			keys = append(keys, p+"x")
		}
		for _, key := range keys {
			_, err := env.Engine.Trigger(ctx, "bill", nil, engine.IdempotencyKey(key))
			checkReserved(t, "Trigger", key, err, prefixes)
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = env.Engine.TriggerTx(ctx, tx, "bill", nil, engine.IdempotencyKey(key))
			checkReserved(t, "TriggerTx", key, err, prefixes)
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := engine.CheckIdempotencyKey(key); !errors.Is(err, engine.ErrReservedKey) {
				t.Errorf("CheckIdempotencyKey(%q) = %v, want ErrReservedKey", key, err)
			}
		}
		for _, key := range []string{" ", "\t \n", "\u00a0"} {
			if _, err := env.Engine.Trigger(ctx, "bill", nil, engine.IdempotencyKey(key)); !errors.Is(err, engine.ErrInvalidKey) ||
				!strings.Contains(err.Error(), "only whitespace") {
				t.Errorf("Trigger with key %q: %v, want ErrInvalidKey saying it is only whitespace", key, err)
			}
		}
		if runs := runsOf(t, env.Engine, "bill"); len(runs) != 0 {
			t.Fatalf("refused triggers created %d runs", len(runs))
		}
		// Keys are compared byte for byte: an ordinary key with spaces
		// around it is still a key of its own.
		if _, err := env.Engine.Trigger(ctx, "bill", nil, engine.IdempotencyKey(" order-1 ")); err != nil {
			t.Fatalf("Trigger with key %q: %v", " order-1 ", err)
		}
	})
}

// checkReserved fails t unless err is ErrReservedKey naming the prefix
// key starts with and listing every reserved prefix.
func checkReserved(t *testing.T, call, key string, err error, prefixes []string) {
	t.Helper()
	if !errors.Is(err, engine.ErrReservedKey) {
		t.Errorf("%s with key %q: %v, want ErrReservedKey", call, key, err)
		return
	}
	used, _, _ := strings.Cut(key, ":")
	if !strings.Contains(err.Error(), fmt.Sprintf("%q", used+":")) {
		t.Errorf("%s with key %q: %q does not name the prefix %q", call, key, err, used+":")
	}
	for _, p := range prefixes {
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) {
			t.Errorf("%s with key %q: %q does not list the reserved prefix %q", call, key, err, p)
		}
	}
}

// TestLongValuesAreCappedInEngineErrors: a long workflow name, or a long
// reserved key, is quoted in the error by its first bytes and its length,
// not in full.
func TestLongValuesAreCappedInEngineErrors(t *testing.T) {
	var calls sync.Map
	env := enginetest.New(t, enginetest.Options{Workflows: eventWorkflows(t, &calls)})
	ctx := context.Background()
	long := strings.Repeat("w", 100_000)
	for name, call := range map[string]func() error{
		"unknown workflow": func() error { _, err := env.Engine.Trigger(ctx, long, nil); return err },
		"reserved key": func() error {
			_, err := env.Engine.Trigger(ctx, "bill", nil, engine.IdempotencyKey("child:"+long))
			return err
		},
	} {
		err := call()
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		if msg := err.Error(); len(msg) > 500 || !strings.Contains(msg, "bytes)") {
			t.Errorf("%s: the error is %d bytes (%.120q...), want the value capped and its length named", name, len(msg), msg)
		}
	}
}
