package jsoncheck

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	cases := []struct {
		name string
		in   string
		want error
	}{
		{"object", `{"a":[1,{"b":"]"}]}`, nil},
		{"at the limit", deep(MaxDepth), nil},
		{"past the limit", deep(MaxDepth + 1), ErrTooDeep},
		{"objects past the limit", strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), ErrTooDeep},
		{"past the limit and cut short", strings.Repeat("[", MaxDepth+1), ErrTooDeep},
		{"cut short", `{"a":`, ErrInvalid},
		{"brackets in a string", `["` + strings.Repeat("[", MaxDepth+1) + `"`, ErrInvalid},
		{"escaped quote keeps the string open", `["\"` + strings.Repeat("[", MaxDepth+1), ErrInvalid},
		{"empty", ``, ErrInvalid},
	}
	for _, c := range cases {
		if got := Check([]byte(c.in)); got != c.want {
			t.Errorf("%s: Check = %v, want %v", c.name, got, c.want)
		}
	}
}
