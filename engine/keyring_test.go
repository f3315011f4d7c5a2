package engine_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/codec/aesgcm"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/engine/enginetest"
	"github.com/dagflow/dagflow/persistence"
)

// startKeyed starts another node of env's cluster with codec c (nil for
// none) and returns Start's error.
func startKeyed(t *testing.T, env *enginetest.Env, c codec.Codec) error {
	t.Helper()
	e, err := engine.New(engine.Config{Store: env.Store, Redis: env.Redis, Prefix: env.Prefix, NoWorkers: true,
		ReconcileInterval: -1, ScheduleInterval: -1, MaxClockSkew: -1, Codec: c})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e.Start(context.Background())
}

func probeKey(t *testing.T, st persistence.Store) string {
	t.Helper()
	p, err := st.CodecProbe(context.Background(), persistence.CodecProbeParams{})
	if err != nil || p == nil {
		t.Fatalf("the store's codec probe: %q, %v; want one", p, err)
	}
	id, _ := keyring(t, "any").KeyOf(p)
	return id
}

// Start checks the node's keyring against the store's probe: the first
// node with a codec writes it, a node whose keyring lacks its key, holds
// another key under its id, or has no codec at all is refused with
// ErrKeyring and a reason, and a keyring with the key among others
// starts.
func TestStartChecksTheKeyring(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env, _, _ := sealedUnder(t, b.opts(t), keyring(t, "k1"))
		if id := probeKey(t, env.Store); id != "k1" {
			t.Fatalf("probe under %q, want k1 (the first node's key)", id)
		}
		other := sha256.Sum256([]byte("not k1"))
		wrong, err := aesgcm.New("k1", map[string][]byte{"k1": other[:]})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name string
			c    codec.Codec
			want string
		}{
			{"another key", keyring(t, "k2"), `unknown key id "k1"`},
			{"another key under the same id", wrong, "authentication failed"},
			{"no codec", nil, "this node has none: set Config.Codec"},
		} {
			err := startKeyed(t, env, tc.c)
			if !errors.Is(err, engine.ErrKeyring) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: Start = %v; want ErrKeyring saying %q", tc.name, err, tc.want)
			}
		}
		if err := startKeyed(t, env, keyring(t, "k2", "k1")); err != nil {
			t.Errorf("a keyring with k1 among others: Start = %v", err)
		}
	})
}

// A store without a codec has no probe and takes nodes without one; the
// first node with a codec writes it, and from then on a node without
// one is refused.
func TestKeyringProbeWhenACodecIsFirstEnabled(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := enginetest.New(t, b.opts(t))
		if p, err := env.Store.CodecProbe(context.Background(), persistence.CodecProbeParams{}); err != nil || p != nil {
			t.Fatalf("a store without a codec has probe %q (%v)", p, err)
		}
		if err := startKeyed(t, env, nil); err != nil {
			t.Fatalf("a second node without a codec: %v", err)
		}
		if err := startKeyed(t, env, keyring(t, "k1")); err != nil {
			t.Fatalf("the first node with a codec: %v", err)
		}
		if id := probeKey(t, env.Store); id != "k1" {
			t.Errorf("probe under %q, want k1", id)
		}
		if err := startKeyed(t, env, nil); !errors.Is(err, engine.ErrKeyring) {
			t.Errorf("a node without a codec after one with: Start = %v, want ErrKeyring", err)
		}
	})
}
