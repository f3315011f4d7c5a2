package names_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/internal/names"
)

// Valid accepts exactly what Pattern does.
func TestValidMatchesPattern(t *testing.T) {
	re := regexp.MustCompile(names.Pattern)
	cases := []string{"", "a", "A", "z", "Z", "0", "_", "-", ".", ":", "a-b_c", "a.b", "a:b", "a/b", "a{b}", "Z9",
		"é", "a\x00", "a b", "a\n", "@", "[", "`", "{", strings.Repeat("a", 64), strings.Repeat("a", 65),
		"a" + strings.Repeat("-", 63), "a" + strings.Repeat("_", 64), "a\xff", "ab\u00e9"}
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
		if got, want := names.Valid(c), re.MatchString(c); got != want {
			t.Errorf("Valid(%q) = %v, Pattern says %v", c, got, want)
		}
	}
}
