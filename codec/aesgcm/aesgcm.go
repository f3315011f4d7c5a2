// Package aesgcm is a payload codec (codec.Codec) that encrypts run
// inputs, step outputs and error texts with AES-256-GCM before the engine
// stores them.
//
// Each payload is sealed with a fresh random 96-bit nonce under the
// current key, with its kind (input, output, error) as additional data, so
// a ciphertext cannot be passed off as another kind. It is stored as a
// JSON string, so the store's JSON columns keep their shape:
//
//	"dagflow-aesgcm:v1:<key id>:<base64url(nonce || ciphertext || tag)>"
//
// Keys rotate by id: encrypt with the current key, decrypt with any key
// the codec knows. To rotate, give every node the new key (still
// encrypting with the old one), then make it current everywhere,
// re-encode what the store holds under the old key (engine.RotateCodec,
// `dagflow codec rotate`), and drop the old key once that reports nothing
// left. With random nonces, use a key for fewer than
// 2^32 payloads.
//
// Correlation values (codec.Hasher) are hashed, not encrypted: HMAC-SHA256
// under a key derived from each AES key, stored as
//
//	dagflow-hmac:v1:<key id>:<base64url(mac)>
//
// A value hashed under a key matches while the codec has that key; drop
// a key only once no step waits on a value hashed under it and no event
// within the engine's lookback carries one.
//
// A payload that is not in this envelope (written before the codec was
// configured, or a text the engine writes in clear such as "cancelled") is
// decoded as it is.
package aesgcm

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/dagflow/dagflow/codec"
)

// KeySize is the length of a key in bytes (AES-256).
const KeySize = 32

// prefix starts every envelope: the JSON string's quote and the scheme.
const prefix = `"dagflow-aesgcm:`

// version is the envelope format this package writes and reads.
const version = "v1"

var keyIDPattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Codec encrypts with its current key and decrypts with any of its keys.
// It is safe for concurrent use.
type Codec struct {
	current string
	aeads   map[string]cipher.AEAD
	macs    []macKey // the current key's first, then by id
}

var (
	_ codec.Codec  = (*Codec)(nil)
	_ codec.Hasher = (*Codec)(nil)
	_ codec.Keyed  = (*Codec)(nil)
)

// New returns a codec that encrypts with the key named current and
// decrypts with any of keys (key id -> 32-byte key). Key ids are 1-64
// characters of [A-Za-z0-9_.-].
func New(current string, keys map[string][]byte) (*Codec, error) {
	c := &Codec{current: current, aeads: make(map[string]cipher.AEAD, len(keys))}
	var errs []error
	for id, key := range keys {
		if !keyIDPattern.MatchString(id) {
			errs = append(errs, fmt.Errorf("aesgcm: key id %q: must be 1-64 characters of [A-Za-z0-9_.-]", id))
			continue
		}
		if len(key) != KeySize {
			errs = append(errs, fmt.Errorf("aesgcm: key %q is %d bytes, want %d (AES-256)", id, len(key), KeySize))
			continue
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			errs = append(errs, fmt.Errorf("aesgcm: key %q: %w", id, err))
			continue
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			errs = append(errs, fmt.Errorf("aesgcm: key %q: %w", id, err))
			continue
		}
		c.aeads[id] = aead
		c.macs = append(c.macs, deriveMACKey(id, key))
	}
	if _, ok := keys[current]; !ok {
		errs = append(errs, fmt.Errorf("aesgcm: current key %q is not among the keys given", current))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sortMACKeys(c.macs, current)
	return c, nil
}

// Encode seals data under the current key and returns the envelope, a
// JSON string.
func (c *Codec) Encode(_ context.Context, kind codec.Kind, data []byte) ([]byte, error) {
	aead := c.aeads[c.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(data)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("aesgcm: nonce: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, data, []byte(kind))
	head := prefix + version + ":" + c.current + ":"
	out := make([]byte, 0, len(head)+base64.RawURLEncoding.EncodedLen(len(sealed))+1)
	out = append(out, head...)
	out = base64.RawURLEncoding.AppendEncode(out, sealed)
	return append(out, '"'), nil
}

// Decode opens an envelope with the key it names. Data that is not an
// envelope is returned as it is.
func (c *Codec) Decode(_ context.Context, kind codec.Kind, data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, []byte(prefix)) {
		return data, nil
	}
	body, ok := bytes.CutSuffix(data[len(prefix):], []byte(`"`))
	if !ok {
		return nil, fmt.Errorf("aesgcm: %s payload: malformed envelope (no closing quote)", kind)
	}
	ver, rest, _ := strings.Cut(string(body), ":")
	if ver != version {
		return nil, fmt.Errorf("aesgcm: %s payload: unsupported envelope version %q (this codec reads %s)", kind, ver, version)
	}
	id, enc, ok := strings.Cut(rest, ":")
	if !ok {
		return nil, fmt.Errorf("aesgcm: %s payload: malformed envelope (no key id)", kind)
	}
	aead, known := c.aeads[id]
	if !known {
		return nil, fmt.Errorf("aesgcm: %s payload: encrypted with unknown key id %q", kind, id)
	}
	sealed, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(sealed) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("aesgcm: %s payload: malformed envelope (bad ciphertext)", kind)
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(kind))
	if err != nil {
		return nil, fmt.Errorf("aesgcm: %s payload under key %q: authentication failed (tampered, truncated, or another kind's payload)", kind, id)
	}
	return plain, nil
}

// CurrentKey implements codec.Keyed: the id of the key Encode uses.
func (c *Codec) CurrentKey() string { return c.current }

// KeyOf implements codec.Keyed: the key id an envelope names ("" for a
// malformed one), and false for data that is not an envelope.
func (c *Codec) KeyOf(data []byte) (string, bool) {
	if !bytes.HasPrefix(data, []byte(prefix)) {
		return "", false
	}
	_, rest, _ := strings.Cut(string(data[len(prefix):]), ":")
	id, _, ok := strings.Cut(rest, ":")
	if !ok {
		return "", true
	}
	return id, true
}
