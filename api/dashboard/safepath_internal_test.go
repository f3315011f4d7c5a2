package dashboard

import "testing"

// TestSafeNext: a post-login destination or a "back" link never leaves
// the server, however the other host is spelt.
func TestSafeNext(t *testing.T) {
	for _, c := range []struct {
		next, base, want string
	}{
		{"/ui/runs?status=failed", "/ui", "/ui/runs?status=failed"},
		{"/runs/abc#steps", "", "/runs/abc#steps"},
		{"", "/ui", "/ui/"},
		{"runs", "", "/"},
		{"//evil.example/", "", "/"},
		{"/\\evil.example/", "", "/"},
		{"/\t/evil.example/", "", "/"},
		{"/\n/evil.example/", "", "/"},
		{"/\r\n/evil.example/", "", "/"},
		{"/%09/evil.example/", "", "/"},
		{"/%5Cevil.example/", "", "/"},
		{"/%2F/evil.example/", "", "/"},
		{"/a\\b", "", "/"},
		{"/a\x7fb", "", "/"},
		{"/a\u0085b", "", "/"},
		{"https://evil.example/", "", "/"},
		{"javascript:alert(1)", "", "/"},
		{"/other/runs", "/ui", "/ui/"},
		{"/ui\t/runs", "/ui", "/ui/"},
		{"/a\xffb", "", "/"},
	} {
		if got := safeNext(c.next, c.base); got != c.want {
			t.Errorf("safeNext(%q, %q) = %q, want %q", c.next, c.base, got, c.want)
		}
	}
	for _, c := range []struct {
		back string
		ok   bool
	}{
		{"/dead-letters?workflow=shop", true},
		{"/\\evil", false},
		{"//evil", false},
		{"/\t/evil", false},
		{"http://evil", false},
		{"", false},
	} {
		if got := localPath(c.back); got != c.ok {
			t.Errorf("localPath(%q) = %v, want %v", c.back, got, c.ok)
		}
	}
}
