package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dagflow/dagflow/persistence/sqlstore"
)

// maxArgBytes bounds what an @FILE or @- argument reads: the stores'
// default limit of a payload, which a larger one could not pass anyway.
const maxArgBytes = sqlstore.DefaultMaxPayload

// readJSONArg returns the JSON of a flag's value: the value itself, or
// with "@FILE" the file's content, or with "@-" stdin's (errStdinLater
// when stdin is nil: it is read only when the command runs). A file or
// stdin over maxArgBytes is refused without reading further; the read
// ends when ctx does (the first SIGTERM), even on a FIFO that no one
// writes to. The errors quote a value given on the command line but never
// a file's or stdin's content, which may be a secret.
func readJSONArg(ctx context.Context, flag, value string, stdin io.Reader) (json.RawMessage, error) {
	if value == "" {
		return nil, nil
	}
	name, fromFile := strings.CutPrefix(value, "@")
	if !fromFile {
		return parseJSONArg(flag, []byte(value), true)
	}
	from := flag + " " + value
	switch {
	case name == "":
		return nil, usagef("%s @: want @FILE or @-", flag)
	case name == "-" && stdin == nil:
		return nil, errStdinLater
	case name == "-":
		from = flag + " @- (stdin)"
	}
	data, err := readArgSource(ctx, name, stdin)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	if len(data) > maxArgBytes {
		return nil, usagef("%s: over the limit of %d bytes", from, maxArgBytes)
	}
	return parseJSONArg(from, data, false)
}

// parseJSONArg checks that data is one JSON value. Only when quote is set
// does the error repeat the decoder's message, which quotes a character
// of data.
func parseJSONArg(from string, data []byte, quote bool) (json.RawMessage, error) {
	var raw json.RawMessage
	err := json.Unmarshal(data, &raw)
	if err == nil {
		return raw, nil
	}
	var se *json.SyntaxError
	switch {
	case quote && errors.As(err, &se):
		return nil, usagef("%s: not valid JSON: %v (at byte %d)", from, err, se.Offset)
	case quote:
		return nil, usagef("%s: not valid JSON: %v", from, err)
	case errors.As(err, &se) && se.Offset >= int64(len(data)):
		return nil, usagef("%s: not valid JSON: it ends early", from)
	case errors.As(err, &se):
		return nil, usagef("%s: not valid JSON at byte %d (the content is not repeated here)", from, se.Offset)
	}
	return nil, usagef("%s: not valid JSON: it ends early", from)
}

// readArgSource reads at most maxArgBytes+1 bytes of the file name, or
// of stdin when name is "-", and gives up when ctx ends. The reading
// goroutine is then unblocked where it can be: the file is closed (which
// ends a read of a pipe), and an open of a FIFO that waits for a writer
// is woken by opening it for writing (wakeFIFO). A read of stdin that
// blocks stays until the process exits, which it is about to.
func readArgSource(ctx context.Context, name string, stdin io.Reader) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	opened := make(chan struct{})
	var mu sync.Mutex
	var file *os.File
	go func() {
		r := stdin
		if name != "-" {
			f, err := os.Open(name)
			close(opened)
			if err != nil {
				done <- result{err: err}
				return
			}
			defer f.Close()
			mu.Lock()
			file = f
			mu.Unlock()
			r = f
		}
		b, err := io.ReadAll(io.LimitReader(r, maxArgBytes+1))
		done <- result{b, err}
	}()
	select {
	case res := <-done:
		return res.data, res.err
	case <-ctx.Done():
	}
	if name != "-" {
		wakeFIFO(name, opened)
		mu.Lock()
		if file != nil {
			file.Close()
		}
		mu.Unlock()
	}
	return nil, fmt.Errorf("reading stopped: %w", context.Cause(ctx))
}

// wakeFIFO ends an open of the FIFO name that waits for a writer, by
// opening it for writing and closing it at once: the open then returns,
// and the read sees the end of the file. It tries until opened is closed
// (the open returned), for at most a second; a name that is not a FIFO
// is left alone.
func wakeFIFO(name string, opened <-chan struct{}) {
	if fi, err := os.Stat(name); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	giveUp := time.After(time.Second)
	for {
		// O_NONBLOCK: without a reader the open fails at once (ENXIO)
		// rather than waiting, and is tried again.
		if w, err := os.OpenFile(name, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		select {
		case <-opened:
			return
		case <-giveUp:
			return
		case <-tick.C:
		}
	}
}
