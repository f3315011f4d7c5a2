package aesgcm_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/codec/aesgcm"
)

func key(b byte) []byte { return bytes.Repeat([]byte{b}, aesgcm.KeySize) }

func mustNew(t *testing.T, current string, keys map[string][]byte) *aesgcm.Codec {
	t.Helper()
	c, err := aesgcm.New(current, keys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoundTripIsJSONAndRandomized(t *testing.T) {
	ctx := context.Background()
	c := mustNew(t, "k1", map[string][]byte{"k1": key(1)})
	in := []byte(`{"card":"4111111111111111"}`)
	a, err := c.Encode(ctx, codec.Input, in)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.Encode(ctx, codec.Input, in)
	if !json.Valid(a) || !strings.HasPrefix(string(a), `"dagflow-aesgcm:v1:k1:`) {
		t.Errorf("envelope %s: want a JSON string tagged v1 and k1", a)
	}
	if bytes.Equal(a, b) {
		t.Error("two encodings of one payload are equal: the nonce is not random")
	}
	if bytes.Contains(a, []byte("4111")) {
		t.Errorf("envelope %s holds the plaintext", a)
	}
	got, err := c.Decode(ctx, codec.Input, a)
	if err != nil || !bytes.Equal(got, in) {
		t.Errorf("Decode = %s, %v; want %s", got, err, in)
	}
}

func TestKeyRotation(t *testing.T) {
	ctx := context.Background()
	old := mustNew(t, "k1", map[string][]byte{"k1": key(1)})
	sealed, _ := old.Encode(ctx, codec.Output, []byte(`"x"`))
	rotated := mustNew(t, "k2", map[string][]byte{"k1": key(1), "k2": key(2)})
	if got, err := rotated.Decode(ctx, codec.Output, sealed); err != nil || string(got) != `"x"` {
		t.Errorf("rotated codec decodes an old-key payload: %s, %v", got, err)
	}
	fresh, _ := rotated.Encode(ctx, codec.Output, []byte(`"y"`))
	if !strings.HasPrefix(string(fresh), `"dagflow-aesgcm:v1:k2:`) {
		t.Errorf("rotated codec encrypts with %s, want key k2", fresh)
	}
	if _, err := old.Decode(ctx, codec.Output, fresh); err == nil || !strings.Contains(err.Error(), `unknown key id "k2"`) {
		t.Errorf("old codec on a new-key payload: err = %v, want unknown key id \"k2\"", err)
	}
}

func TestDecodeRefusesTamperingAndOtherKinds(t *testing.T) {
	ctx := context.Background()
	c := mustNew(t, "k1", map[string][]byte{"k1": key(1)})
	sealed, _ := c.Encode(ctx, codec.Output, []byte(`{"a":1}`))
	if _, err := c.Decode(ctx, codec.Input, sealed); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("an output decoded as an input: err = %v, want authentication failed", err)
	}
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-3] ^= 'A' ^ 'B'
	if flipped[len(flipped)-3] == sealed[len(sealed)-3] {
		flipped[len(flipped)-3] = 'A'
	}
	cases := map[string][]byte{
		"tampered":        flipped,
		"truncated":       append(bytes.Clone(sealed[:30]), '"'),
		"no closing":      sealed[:len(sealed)-1],
		"future version":  []byte(`"dagflow-aesgcm:v9:k1:AAAA"`),
		"no key id":       []byte(`"dagflow-aesgcm:v1"`),
		"not base64":      []byte(`"dagflow-aesgcm:v1:k1:!!!"`),
		"other key bytes": mustEncode(t, mustNew(t, "k1", map[string][]byte{"k1": key(9)}), codec.Output),
	}
	for name, data := range cases {
		if got, err := c.Decode(ctx, codec.Output, data); err == nil {
			t.Errorf("%s: Decode = %s, want an error", name, got)
		}
	}
}

func mustEncode(t *testing.T, c *aesgcm.Codec, kind codec.Kind) []byte {
	t.Helper()
	b, err := c.Encode(context.Background(), kind, []byte(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodePassesPlaintextThrough(t *testing.T) {
	c := mustNew(t, "k1", map[string][]byte{"k1": key(1)})
	for _, in := range []string{`{"a":1}`, `"plain"`, `cancelled`, ``} {
		got, err := c.Decode(context.Background(), codec.Error, []byte(in))
		if err != nil || string(got) != in {
			t.Errorf("Decode(%q) = %q, %v; want it unchanged", in, got, err)
		}
	}
}

func TestNewRefusesBadKeys(t *testing.T) {
	cases := []struct {
		name    string
		current string
		keys    map[string][]byte
		want    string
	}{
		{"short key", "k1", map[string][]byte{"k1": make([]byte, 16)}, `key "k1" is 16 bytes, want 32`},
		{"bad id", "k:1", map[string][]byte{"k:1": key(1)}, `key id "k:1": must be`},
		{"unknown current", "k2", map[string][]byte{"k1": key(1)}, `current key "k2" is not among the keys given`},
		{"no keys", "k1", nil, `current key "k1" is not among`},
	}
	for _, c := range cases {
		_, err := aesgcm.New(c.current, c.keys)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// KeyOf names the key an envelope was sealed under, whichever keys the
// codec has, and tells clear data from sealed.
func TestKeyOf(t *testing.T) {
	k := bytes.Repeat([]byte{1}, aesgcm.KeySize)
	old, err := aesgcm.New("k1", map[string][]byte{"k1": k})
	if err != nil {
		t.Fatal(err)
	}
	cur, err := aesgcm.New("k2", map[string][]byte{"k2": bytes.Repeat([]byte{2}, aesgcm.KeySize)})
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := old.Encode(context.Background(), codec.Input, []byte(`{"a":1}`))
	if id, ok := cur.KeyOf(sealed); !ok || id != "k1" || cur.CurrentKey() != "k2" {
		t.Errorf("KeyOf(sealed under k1) = %q, %v; current %q", id, ok, cur.CurrentKey())
	}
	if id, ok := cur.KeyOf([]byte(`{"a":1}`)); ok || id != "" {
		t.Errorf("KeyOf(clear) = %q, %v; want not sealed", id, ok)
	}
	if id, ok := cur.KeyOf([]byte(`"dagflow-aesgcm:v1"`)); !ok || id != "" {
		t.Errorf("KeyOf(malformed) = %q, %v; want sealed under no key", id, ok)
	}
}
