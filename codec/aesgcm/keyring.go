package aesgcm

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// ParseKeyring returns a codec from the text of a key file, so that the
// keys can live in a secret file rather than in code or flags. Each line
// is "<key id>=<base64 of the 32-byte key>" (standard or URL alphabet,
// padded or not); blank lines and lines starting with # are skipped. The
// first key is the current one: to rotate, add the new key on top.
// Errors name the line, never the key.
func ParseKeyring(text []byte) (*Codec, error) {
	keys := map[string][]byte{}
	current := ""
	sc := bufio.NewScanner(bytes.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, enc, ok := strings.Cut(line, "=")
		id, enc = strings.TrimSpace(id), strings.TrimSpace(enc)
		if !ok || id == "" {
			return nil, fmt.Errorf("aesgcm: keyring line %d: want <key id>=<base64 key>", n)
		}
		if _, dup := keys[id]; dup {
			return nil, fmt.Errorf("aesgcm: keyring line %d: key id %q given twice", n, id)
		}
		key, err := decodeKey(enc)
		if err != nil {
			return nil, fmt.Errorf("aesgcm: keyring line %d: key %q is not base64", n, id)
		}
		keys[id] = key
		if current == "" {
			current = id
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("aesgcm: keyring: %w", err)
	}
	if len(keys) == 0 {
		return nil, errors.New("aesgcm: keyring has no keys")
	}
	return New(current, keys)
}

func decodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}
