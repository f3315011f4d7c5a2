//go:build !nodev

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/internal/testenv"
)

// TestDevRunsToCompletion runs `dagflow dev --once` as a user would on a
// fresh machine: no servers, a new SQLite file.
func TestDevRunsToCompletion(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db := filepath.Join(t.TempDir(), "dev.db")
	var out, errb bytes.Buffer
	if code := run(ctx, []string{"dev", "--once", "-db", db, "-runs", "6"}, &out, &errb); code != 0 {
		t.Fatalf("dagflow dev exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	got := out.String()
	for _, want := range []string{"succeeded", "compensated", "failed", "skipped", "retrying", "final states:"} {
		if !strings.Contains(got, want) {
			t.Errorf("dev output lacks %q:\n%s", want, got)
		}
	}
	// A second session on the same file starts new runs and finishes them.
	out.Reset()
	if code := run(ctx, []string{"dev", "--once", "-db", db, "-runs", "2"}, &out, &errb); code != 0 {
		t.Fatalf("second dagflow dev exited %d\n%s\n%s", code, out.String(), errb.String())
	}
}

func TestUnknownCommandAndUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, &out, &errb); code != 2 {
		t.Errorf("unknown command exited %d, want 2", code)
	}
	if !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Errorf("stderr %q does not name the command", errb.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "dev") {
		t.Errorf("help exited %d with %q", code, out.String())
	}
	errb.Reset()
	if code := run(context.Background(), []string{"dev", "-runs", "0"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "-runs 0") {
		t.Errorf("dev -runs 0 exited %d with %q", code, errb.String())
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"dev", "--once", "--listen", "127.0.0.1:0"}, "--listen with --once"},
		{[]string{"dev", "--once", "--every", "2s"}, "--every with --once"},
		{[]string{"dev", "--timeout", "1m"}, "--timeout without --once"},
		{[]string{"dev", "--every", "0s"}, "--every 0s"},
		{[]string{"dev", "--listen", "nowhere"}, `--listen "nowhere"`},
	} {
		errb.Reset()
		db := filepath.Join(t.TempDir(), "dev.db")
		if code := run(context.Background(), append(tc.args, "--db", db), &out, &errb); code != 2 || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%q exited %d with %q; want 2 and %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestBinaryDevServesAPI: `dagflow dev --listen 127.0.0.1:0` serves
// /v1/runs with demo runs within 5 s of starting, and stops cleanly on
// SIGINT.
func TestBinaryDevServesAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildDagflow(t)
	cmd := exec.Command(bin, "dev", "--listen", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "dev.db"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var out, errb syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var u string
	var list client.RunList
	for time.Since(started) < 5*time.Second && len(list.Runs) == 0 {
		time.Sleep(50 * time.Millisecond)
		if u == "" {
			if m := apiURL.FindStringSubmatch(out.String()); m != nil {
				u = m[1]
			}
			continue
		}
		resp, err := http.Get(u + "/v1/runs")
		if err != nil {
			continue
		}
		if resp.StatusCode == http.StatusOK {
			list = client.RunList{}
			json.NewDecoder(resp.Body).Decode(&list)
		}
		resp.Body.Close()
	}
	if len(list.Runs) == 0 {
		t.Fatalf("dev served no run at %q/v1/runs within 5s of starting\nstdout:\n%s\nstderr:\n%s", u, &out, &errb)
	}
	if wf := list.Runs[0].Workflow; wf != "order" && wf != "order_go" {
		t.Errorf("dev's run is of workflow %q", wf)
	}
	testenv.Eventually(t, 30*time.Second, func() bool { return strings.Contains(out.String(), "finished: compensated") },
		"dev's runs do not show the designed outcomes:\n%s", &out)
	// /metrics, without a key like the rest of dev's API, counts the
	// compensated run.
	code, metrics := get(t, "GET", u+"/metrics", "", "")
	if code != http.StatusOK || !regexp.MustCompile(`dagflow_runs_finished_total\{status="compensated",workflow="order(_go)?"\} [1-9]`).MatchString(metrics) {
		t.Errorf("GET /metrics: %d, no compensated run counted:\n%.3000s", code, metrics)
	}
	cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("dev exited with %v after SIGINT:\n%s", err, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("dev did not stop within 20s of SIGINT:\n%s", errb.String())
	}
	if _, err := http.Get(u + "/healthz"); err == nil {
		t.Errorf("dev still serves after it exited")
	}
	if strings.Contains(out.String(), "UNEXPECTED") {
		t.Errorf("a dev run did not end as designed:\n%s", out.String())
	}
}
