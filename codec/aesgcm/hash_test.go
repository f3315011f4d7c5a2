package aesgcm_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/codec/aesgcm"
)

// Hash is deterministic per key, differs for other data, kinds and keys,
// puts the current key first, and holds no plaintext.
func TestHash(t *testing.T) {
	ctx := context.Background()
	c := mustNew(t, "k2", map[string][]byte{"k1": key(1), "k2": key(2), "k0": key(3)})
	hash := func(c *aesgcm.Codec, kind codec.Kind, v string) []string {
		t.Helper()
		hs, err := c.Hash(ctx, kind, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return hs
	}
	a := hash(c, codec.Correlation, "ORDER-1")
	if len(a) != 3 || !strings.HasPrefix(a[0], "dagflow-hmac:v1:k2:") || !strings.HasPrefix(a[1], "dagflow-hmac:v1:k0:") ||
		!strings.HasPrefix(a[2], "dagflow-hmac:v1:k1:") {
		t.Fatalf("hashes %q: want k2 (current), then k0 and k1", a)
	}
	for _, h := range a {
		if len(h) > 128 || strings.Contains(h, "ORDER") {
			t.Errorf("hash %q: want at most 128 bytes and no plaintext", h)
		}
	}
	if again := hash(c, codec.Correlation, "ORDER-1"); strings.Join(again, ",") != strings.Join(a, ",") {
		t.Errorf("hashing again gives %q, want %q", again, a)
	}
	for _, other := range [][]string{hash(c, codec.Correlation, "ORDER-1 "), hash(c, codec.Correlation, "order-1"), hash(c, codec.Input, "ORDER-1")} {
		for i := range a {
			if other[i] == a[i] {
				t.Errorf("another value or kind hashes to %q too", a[i])
			}
		}
	}
	// The same key under another codec (rotated) gives the same hash.
	old := mustNew(t, "k1", map[string][]byte{"k1": key(1)})
	if h := hash(old, codec.Correlation, "ORDER-1"); h[0] != a[2] {
		t.Errorf("k1's hash is %q in one codec and %q in another", h[0], a[2])
	}
	other := mustNew(t, "k1", map[string][]byte{"k1": key(9)})
	if h := hash(other, codec.Correlation, "ORDER-1"); h[0] == a[2] {
		t.Error("two key bytes under one id give the same hash")
	}
}
