package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// redacted replaces a secret in what an [HTTP] step stores.
const redacted = "[redacted]"

// minSecretLen is the shortest header value written in a step that is
// blanked: shorter ones (a version, a flag, "gzip") are not credentials,
// and blanking them would mangle outputs. A value from the environment
// is blanked whatever its length.
const minSecretLen = 8

// notSecret are the headers whose values describe formats, never
// credentials: they are not blanked.
var notSecret = []string{"Accept", "Accept-Encoding", "Accept-Language", "Content-Type", "User-Agent"}

// redactor blanks the values of a step's headers out of what the step
// stores and logs: its errors and its output.
type redactor struct {
	secrets  []string // longest first
	replacer *strings.Replacer
}

// newRedactor makes the redactor of an attempt: the whole value of every
// header (but those of notSecret, and short ones) and every value taken
// from the environment (env), as they are and as JSON or a JSON encoder
// that escapes "/" would write them.
func newRedactor(hdr http.Header, env []string) *redactor {
	values := slices.Clone(env)
	for name, vs := range hdr {
		if slices.Contains(notSecret, name) {
			continue
		}
		for _, v := range vs {
			if len(v) >= minSecretLen {
				values = append(values, v)
			}
		}
	}
	r := &redactor{}
	for _, v := range values {
		if v == "" {
			continue
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(v) // a string always encodes
		quoted := strings.TrimSuffix(b.String(), "\n")
		js := quoted[1 : len(quoted)-1]
		jsHTML, _ := json.Marshal(v)
		r.secrets = append(r.secrets, v, js, string(jsHTML[1:len(jsHTML)-1]), strings.ReplaceAll(js, "/", `\/`))
	}
	slices.SortFunc(r.secrets, func(a, b string) int { return len(b) - len(a) })
	r.secrets = slices.Compact(r.secrets)
	pairs := make([]string, 0, 2*len(r.secrets))
	for _, s := range r.secrets {
		pairs = append(pairs, s, redacted)
	}
	r.replacer = strings.NewReplacer(pairs...)
	return r
}

// longest is the length of the longest secret (0 for none).
func (r *redactor) longest() int {
	if len(r.secrets) == 0 {
		return 0
	}
	return len(r.secrets[0])
}

// text blanks every secret in s.
func (r *redactor) text(s string) string {
	if len(r.secrets) == 0 {
		return s
	}
	return r.replacer.Replace(s)
}

// snippet is the first n bytes of b with every secret that starts in
// them blanked whole, as valid UTF-8 without surrounding space. b holds
// the body's first n+r.longest()-1 bytes (or all of it), so that a
// secret across the cut is seen whole: blanking happens before cutting.
func (r *redactor) snippet(b []byte, n int) string {
	var out strings.Builder
	body := string(b)
	for i := 0; i < len(body) && i < n; {
		j := slices.IndexFunc(r.secrets, func(s string) bool { return strings.HasPrefix(body[i:], s) })
		if j < 0 {
			out.WriteByte(body[i])
			i++
			continue
		}
		out.WriteString(redacted)
		i += len(r.secrets[j])
	}
	return strings.ToValidUTF8(strings.TrimSpace(out.String()), "\uFFFD")
}

// json blanks every secret in a JSON body's strings (object keys
// included) and numbers, decoded, so that an escaped echo is caught and
// the result stays valid JSON. A body that holds none is returned as it
// is; one that does is encoded again (object keys sorted, numbers as
// written).
func (r *redactor) json(b []byte) []byte {
	if len(r.secrets) == 0 || (bytes.IndexByte(b, '\\') < 0 && !slices.ContainsFunc(r.secrets, func(s string) bool {
		return bytes.Contains(b, []byte(s))
	})) {
		return b
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return b
	}
	v, changed := r.value(v)
	if !changed {
		return b
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return b
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n"))
}

// value blanks the secrets of a decoded JSON value; changed tells
// whether it did.
func (r *redactor) value(v any) (_ any, changed bool) {
	switch x := v.(type) {
	case string:
		s := r.text(x)
		return s, s != x
	case json.Number:
		if s := r.text(string(x)); s != string(x) {
			return s, true // no longer a number: a string
		}
	case []any:
		for i, e := range x {
			var c bool
			if x[i], c = r.value(e); c {
				changed = true
			}
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			e, c := r.value(e)
			rk := r.text(k)
			changed = changed || c || rk != k
			out[rk] = e
		}
		return out, changed
	}
	return v, changed
}

// capped is s cut to at most n bytes (on a rune boundary), with its
// length when it was cut: a value a remote server chose (a Location, a
// status line) can be megabytes, and goes into errors that are logged.
func capped(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", s[:cut], len(s))
}
