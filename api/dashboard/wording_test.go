package dashboard_test

import (
	"regexp"
	"strings"
	"testing"
)

// queueRowRE matches a queues page row: its name and its "Next task"
// cell.
var queueRowRE = regexp.MustCompile(`<tr><td>([^<]+)</td><td class="num">\d+</td><td class="num">\d+</td><td class="num">\d+</td><td class="num">[^<]*</td><td>(.*?)</td>`)

// TestQueuesPageEmptyNextTask: a queue with no ready task shows "—" as
// its next task, not an empty code box; a queue with one shows its id.
func TestQueuesPageEmptyNextTask(t *testing.T) {
	eachBackend(t, func(t *testing.T, real bool) {
		e := newEnv(t, envOptions{real: real})
		b := e.browser(t)
		page := b.get("/queues")
		rows := queueRowRE.FindAllStringSubmatch(page.body, -1)
		if len(rows) == 0 {
			t.Fatalf("the queues page has no queue row:\n%s", page.body)
		}
		for _, r := range rows {
			if r[1] == "default" && r[2] != "—" {
				t.Errorf("the idle default queue's next task cell is %q, want —", r[2])
			}
		}
		if strings.Contains(page.body, "<code></code>") {
			t.Error("the queues page has an empty <code>")
		}
	})
}
