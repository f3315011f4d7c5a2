package faults

import "testing"

// TestProxyMatching: the drop rule's command matches alone or as the last
// statement of a multi-statement call, not as a prefix or inside a word;
// the replies end at an error or at the OK without more results.
func TestProxyMatching(t *testing.T) {
	for text, want := range map[string]bool{
		"COMMIT":     true,
		" COMMIT \n": true,
		"START TRANSACTION;\nINSERT INTO t VALUES (1);\nCOMMIT": true,
		"INSERT INTO t VALUES (1); COMMIT":                      true,
		"COMMIT; SELECT 1":                                      false,
		"INSERT INTO t VALUES ('NOCOMMIT')":                     false,
		"XCOMMIT":                                               false,
	} {
		if got := endsWithStatement([]byte(text), []byte("COMMIT")); got != want {
			t.Errorf("%q: %v, want %v", text, got, want)
		}
	}
	more := []byte{0x00, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00} // 1 row, id 0, MORE_RESULTS_EXISTS
	last := []byte{0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00} // autocommit only
	long := []byte{0x00, 0xfc, 0x10, 0x27, 0x00, 0x08, 0x00} // 10,000 rows as a 3-byte int, more results
	for _, c := range []struct {
		name string
		pkt  []byte
		want bool
	}{{"ok, more", more, false}, {"ok, last", last, true}, {"ok, long count, more", long, false},
		{"error", []byte{0xff, 0x26, 0x04}, true}, {"truncated", []byte{0x00, 0xfc}, true}} {
		if got := lastReply(c.pkt); got != c.want {
			t.Errorf("%s: lastReply = %v, want %v", c.name, got, c.want)
		}
	}
}
