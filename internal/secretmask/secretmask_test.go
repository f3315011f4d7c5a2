package secretmask

import "testing"

func TestReplace(t *testing.T) {
	for _, tc := range []struct{ text, secret, want string }{
		// The password alone, and beside punctuation, goes.
		{"auth hunter2 failed", "hunter2", "auth xxxxx failed"},
		{`{"password":"hunter2"}`, "hunter2", `{"password":"xxxxx"}`},
		{"hunter2", "hunter2", "xxxxx"},
		{"a=hunter2,b=hunter2.", "hunter2", "a=xxxxx,b=xxxxx."},
		// Part of a longer word: the word is left whole.
		{"WRONGPASS invalid username-password pair", "WRONG", "WRONGPASS invalid username-password pair"},
		{"WRONGPASS invalid username-password pair", "PASS", "WRONGPASS invalid username-password pair"},
		{"WRONGPASS invalid username-password pair", "invalid", "WRONGPASS xxxxx username-password pair"},
		{"NOAUTH_x NOAUTH", "NOAUTH", "NOAUTH_x xxxxx"},
		{"pässwort wort", "wort", "pässwort xxxxx"},
		// A password that starts or ends with punctuation goes wherever
		// that edge touches a word.
		{"x!pw!y", "!pw!", "xxxxxxy"},
		{"ab#1", "#1", "abxxxxx"},
		// A place inside a word, then one alone.
		{"aaab aab", "aab", "aaab xxxxx"},
		// Nothing to do.
		{"text", "", "text"},
		{"text", "other", "text"},
	} {
		if got := Replace(tc.text, tc.secret, "xxxxx"); got != tc.want {
			t.Errorf("Replace(%q, %q) = %q, want %q", tc.text, tc.secret, got, tc.want)
		}
	}
}
