package sqlstore

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
)

// The byte loop isID accepts exactly what its regexp does (isName is
// package names' rule, tested there).
var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

func TestIDCheckMatchesItsRegexp(t *testing.T) {
	cases := []string{"", "a", "A", "0", "_", "-", ".", ":", "a-b_c", "a.b", "a:b", "0193a1b2-c3d4-7e5f-8a9b-000000000001",
		"run.1:x", "é", "a\x00", "a b", "a\n", "@", "[", "`", "{", "Z9", strings.Repeat("a", 64), strings.Repeat("a", 65),
		strings.Repeat("1", 64), "a" + strings.Repeat("-", 63), "a\xff", "ab\u00e9"}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("aZ09_-.:@[`{/ \x00\xc3\xa9\xff")
	for range 20000 {
		b := make([]byte, r.IntN(70))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		cases = append(cases, string(b))
	}
	for i := range 256 {
		cases = append(cases, string([]byte{byte(i)}), "a"+string([]byte{byte(i)}))
	}
	for _, c := range cases {
		if got, want := isID(c), idRE.MatchString(c); got != want {
			t.Errorf("isID(%q) = %v, regexp says %v", c, got, want)
		}
	}
}
