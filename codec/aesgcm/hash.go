package aesgcm

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"

	"github.com/dagflow/dagflow/codec"
)

// hashPrefix starts every hash this package makes.
const hashPrefix = "dagflow-hmac:" + version + ":"

// macLabel derives a key's HMAC key from it, so that the AES key itself
// is never used for a second purpose.
const macLabel = "dagflow-aesgcm correlation hash v1"

// macKey is one key's HMAC key, with the head of the hashes it makes.
type macKey struct {
	id   string
	head string // hashPrefix + id + ":"
	key  []byte
}

func deriveMACKey(id string, key []byte) macKey {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(macLabel))
	return macKey{id: id, head: hashPrefix + id + ":", key: m.Sum(nil)}
}

// sortMACKeys puts the current key first and the others by id.
func sortMACKeys(ks []macKey, current string) {
	slices.SortFunc(ks, func(a, b macKey) int {
		switch {
		case a.id == current:
			return -1
		case b.id == current:
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
}

// Hash returns data's HMAC-SHA256 under each key (derived from it), the
// current key's first, bound to kind: "dagflow-hmac:v1:<key id>:<mac>",
// at most 124 bytes.
func (c *Codec) Hash(_ context.Context, kind codec.Kind, data []byte) ([]string, error) {
	out := make([]string, len(c.macs))
	var sum [sha256.Size]byte
	for i, k := range c.macs {
		m := hmac.New(sha256.New, k.key)
		m.Write([]byte(kind))
		m.Write([]byte{0})
		m.Write(data)
		b := make([]byte, 0, len(k.head)+base64.RawURLEncoding.EncodedLen(sha256.Size))
		b = append(b, k.head...)
		out[i] = string(base64.RawURLEncoding.AppendEncode(b, m.Sum(sum[:0])))
	}
	return out, nil
}
