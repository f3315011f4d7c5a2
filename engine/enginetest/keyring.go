package enginetest

import (
	"crypto/sha256"
	"testing"

	"github.com/dagflow/dagflow/codec/aesgcm"
)

// Keyring returns an AES-GCM codec with the named keys, the first
// current. A key's bytes derive from its name, so two keyrings naming a
// key share it: a test can give a second node some of the first's keys.
func Keyring(t testing.TB, ids ...string) *aesgcm.Codec {
	t.Helper()
	keys := map[string][]byte{}
	for _, id := range ids {
		k := sha256.Sum256([]byte("test key " + id))
		keys[id] = k[:]
	}
	c, err := aesgcm.New(ids[0], keys)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
