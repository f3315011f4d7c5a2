package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReadJSONArgFromDevZero: an endless file is refused, quickly, once
// it is over the limit, and the error names the limit, not the content.
func TestReadJSONArgFromDevZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, err := readJSONArg(ctx, "--input", "@/dev/zero", nil)
	if err == nil || !strings.Contains(err.Error(), "over the limit of 1048576 bytes") || !strings.Contains(err.Error(), "/dev/zero") {
		t.Fatalf("@/dev/zero: %v, want a size error naming the file", err)
	}
	if strings.ContainsRune(err.Error(), 0) || strings.Contains(err.Error(), `\x00`) {
		t.Errorf("the error quotes the content: %q", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("refusing /dev/zero took %v", d)
	}
}

// TestReadJSONArgFIFOWithoutWriter: a FIFO that no one writes to does not
// hold the command once its context ends (the first SIGTERM), and the
// reader it started ends too.
func TestReadJSONArgFIFOWithoutWriter(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "input.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := readJSONArg(ctx, "--payload", "@"+fifo, nil)
		done <- err
	}()
	time.AfterFunc(100*time.Millisecond, cancel)
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), fifo) {
			t.Fatalf("a cancelled read of a FIFO: %v, want context.Canceled naming the file", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a FIFO without a writer ignored the cancelled context")
	}
}

// TestReadJSONArgErrorsHideContent: a file or stdin that is not JSON is
// an error that says where, not what the content is.
func TestReadJSONArgErrorsHideContent(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(file, []byte(`Sx3cretToken-not-json`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		value string
		stdin string
		want  string
	}{
		{"@" + file, "", "--input @" + file + ": not valid JSON at byte 1"},
		{"@-", "Sx3cretToken-not-json", "--input @- (stdin): not valid JSON at byte 1"},
		{"@-", `{"a":`, "--input @- (stdin): not valid JSON: it ends early"},
	} {
		_, err := readJSONArg(ctx, "--input", tc.value, strings.NewReader(tc.stdin))
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a usage error with %q", tc.value, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), "'S'") || strings.Contains(err.Error(), "x3cret")) {
			t.Errorf("%s: the error quotes the content: %v", tc.value, err)
		}
	}
	// A missing file names the file.
	if _, err := readJSONArg(ctx, "--input", "@"+file+".missing", nil); err == nil || !strings.Contains(err.Error(), file+".missing") {
		t.Errorf("a missing file: %v", err)
	}
	// A value given on the command line is the user's own: it may be quoted.
	if _, err := readJSONArg(ctx, "--input", "{", nil); err == nil || !strings.Contains(err.Error(), "--input: not valid JSON") {
		t.Errorf("an inline value: %v", err)
	}
	// Stdin when the command does not read it yet.
	if _, err := readJSONArg(ctx, "--input", "@-", nil); !errors.Is(err, errStdinLater) {
		t.Errorf("@- without stdin: %v, want errStdinLater", err)
	}
}
