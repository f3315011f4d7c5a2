package faults

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A worker process that traces writes every span it ends to a file, one
// JSON object a line, at once (a SimpleSpanProcessor exports each span
// as it ends, and the write goes straight to the file): what a process
// wrote before it was SIGKILLed is there for the test to read.

// spanRecord is one finished span as a worker wrote it.
type spanRecord struct {
	TraceID string            `json:"trace_id"`
	SpanID  string            `json:"span_id"`
	Parent  string            `json:"parent,omitempty"` // the parent's span id
	Links   []linkRecord      `json:"links,omitempty"`
	Name    string            `json:"name"`
	Kind    string            `json:"kind"`
	Status  string            `json:"status"`
	Attrs   map[string]string `json:"attrs"`
	Start   time.Time         `json:"start"`
	End     time.Time         `json:"end"`
	// Process is the writer's pid.
	Process int `json:"process"`
}

// linkRecord is a span's link.
type linkRecord struct {
	TraceID string            `json:"trace_id"`
	SpanID  string            `json:"span_id"`
	Attrs   map[string]string `json:"attrs,omitempty"`
}

// spanFile is a SpanExporter that appends spans to a file.
type spanFile struct {
	mu sync.Mutex
	f  *os.File
}

// fileTracerProvider returns a provider that writes each span to path as
// it ends.
func fileTracerProvider(path string) (*sdktrace.TracerProvider, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("span file: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithSyncer(&spanFile{f: f})), nil
}

// spanRecordOf converts a finished span.
func spanRecordOf(s sdktrace.ReadOnlySpan) spanRecord {
	r := spanRecord{
		TraceID: s.SpanContext().TraceID().String(), SpanID: s.SpanContext().SpanID().String(),
		Name: s.Name(), Kind: s.SpanKind().String(), Status: s.Status().Code.String(),
		Attrs: map[string]string{}, Start: s.StartTime(), End: s.EndTime(), Process: os.Getpid(),
	}
	if s.Parent().IsValid() {
		r.Parent = s.Parent().SpanID().String()
	}
	for _, kv := range s.Attributes() {
		r.Attrs[string(kv.Key)] = kv.Value.String()
	}
	for _, l := range s.Links() {
		lr := linkRecord{TraceID: l.SpanContext.TraceID().String(), SpanID: l.SpanContext.SpanID().String()}
		for _, kv := range l.Attributes {
			if lr.Attrs == nil {
				lr.Attrs = map[string]string{}
			}
			lr.Attrs[string(kv.Key)] = kv.Value.String()
		}
		r.Links = append(r.Links, lr)
	}
	return r
}

// ExportSpans implements sdktrace.SpanExporter.
func (x *spanFile) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	var buf []byte
	for _, s := range spans {
		b, err := json.Marshal(spanRecordOf(s))
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	_, err := x.f.Write(buf)
	return err
}

// Shutdown implements sdktrace.SpanExporter.
func (x *spanFile) Shutdown(context.Context) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.f.Close()
}

// readSpanFiles reads every span written to the *.spans files in dir.
func readSpanFiles(dir string) ([]spanRecord, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.spans"))
	if err != nil {
		return nil, err
	}
	var out []spanRecord
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			var r spanRecord
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				f.Close()
				return nil, fmt.Errorf("%s: %w", p, err)
			}
			out = append(out, r)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return out, nil
}
