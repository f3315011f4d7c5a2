package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/engine"
)

func TestParseQueueLimits(t *testing.T) {
	got, err := parseQueueLimits([]string{"payments=concurrency:3", "partner=rate:20/1s,burst:5,concurrency:2"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]engine.QueueLimit{
		"payments": {Concurrency: 3},
		"partner":  {Rate: 20, Per: time.Second, Burst: 5, Concurrency: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("limits (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ spec, want string }{
		{"payments", `--queue-limit "payments": want NAME=concurrency:N`},
		{"p=concurrency:x", `--queue-limit "p=concurrency:x": concurrency:x: strconv.Atoi`},
		{"p=rate:20", `--queue-limit "p=rate:20": rate:20: want N/PERIOD`},
		{"p=rate:20/soon", `rate:20/soon: time: invalid duration "soon"`},
		{"p=speed:3", `unknown setting "speed"`},
	} {
		if _, err := parseQueueLimits([]string{tc.spec}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parse %q = %v, want an error saying %q", tc.spec, err, tc.want)
		}
	}
	if _, err := parseQueueLimits([]string{"a=concurrency:1", "a=concurrency:2"}); err == nil || !strings.Contains(err.Error(), `queue "a" is given twice`) {
		t.Errorf("a queue given twice: %v", err)
	}
}
