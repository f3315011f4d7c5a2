package aesgcm_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/codec/aesgcm"
)

func TestParseKeyring(t *testing.T) {
	k1 := base64.StdEncoding.EncodeToString(key(1))
	k2 := base64.RawURLEncoding.EncodeToString(key(2))
	c, err := aesgcm.ParseKeyring([]byte("# rotated in June\nk2 = " + k2 + "\n\nk1=" + k1 + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := c.Encode(context.Background(), codec.Output, []byte(`1`))
	if !strings.HasPrefix(string(sealed), `"dagflow-aesgcm:v1:k2:`) {
		t.Errorf("encrypted with %s, want the first key, k2", sealed)
	}
	old, _ := aesgcm.New("k1", map[string][]byte{"k1": key(1)})
	sealed, _ = old.Encode(context.Background(), codec.Output, []byte(`1`))
	if got, err := c.Decode(context.Background(), codec.Output, sealed); err != nil || string(got) != "1" {
		t.Errorf("k1 payload: %s, %v", got, err)
	}

	secret := base64.StdEncoding.EncodeToString(key(3)[:16])
	cases := []struct{ text, want string }{
		{"", "keyring has no keys"},
		{"# only a comment\n", "keyring has no keys"},
		{"k1\n", "line 1: want <key id>=<base64 key>"},
		{"k1=" + k1 + "\nk1=" + k1, `line 2: key id "k1" given twice`},
		{"\nk1=not*base64", `line 2: key "k1" is not base64`},
		{"k1=" + secret, `key "k1" is 16 bytes, want 32`},
	}
	for _, cs := range cases {
		_, err := aesgcm.ParseKeyring([]byte(cs.text))
		if err == nil || !strings.Contains(err.Error(), cs.want) {
			t.Errorf("%q: err = %v, want %q", cs.text, err, cs.want)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%q: the error shows the key: %v", cs.text, err)
		}
	}
}
