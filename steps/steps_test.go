package steps_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/steps"
)

type order struct {
	ID    string  `json:"id"`
	Total float64 `json:"total"`
}

type reservation struct {
	Warehouse string `json:"warehouse"`
}

func TestDecodeInput(t *testing.T) {
	tests := []struct {
		name    string
		input   string
		want    order
		wantErr string
	}{
		{name: "ok", input: `{"id":"o1","total":12.5}`, want: order{ID: "o1", Total: 12.5}},
		{name: "empty input leaves zero value", input: ``, want: order{}},
		{name: "null", input: `null`, want: order{}},
		{name: "bad json", input: `{"id":`, wantErr: `steps: step "reserve": decode input into steps_test.order: unexpected end of JSON input`},
		{name: "wrong type", input: `{"total":"x"}`, wantErr: `steps: step "reserve": decode input into steps_test.order: json: cannot unmarshal string into Go struct field order.total of type float64`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := steps.Context{Step: "reserve", Input: json.RawMessage(tt.input)}
			var got order
			err := sc.DecodeInput(&got)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("DecodeInput error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeInput: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("DecodeInput mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeOutput(t *testing.T) {
	sc := steps.Context{Step: "ship", Outputs: map[string]json.RawMessage{
		"reserve": json.RawMessage(`{"warehouse":"EU"}`),
		"notify":  nil,
		"bad":     json.RawMessage(`[`),
	}}
	var r reservation
	if err := sc.DecodeOutput("reserve", &r); err != nil {
		t.Fatalf("DecodeOutput(reserve): %v", err)
	}
	if got, want := r.Warehouse, "EU"; got != want {
		t.Errorf("warehouse = %q, want %q", got, want)
	}
	var n any = "unchanged"
	if err := sc.DecodeOutput("notify", &n); err != nil {
		t.Errorf("DecodeOutput(notify) with empty output: %v", err)
	}
	err := sc.DecodeOutput("pack", &r)
	if !errors.Is(err, steps.ErrNoOutput) {
		t.Errorf("DecodeOutput(pack) error = %v, want ErrNoOutput", err)
	}
	if got, want := err.Error(), `steps: step "ship": decode output of step "pack": no output`; got != want {
		t.Errorf("error = %q, want %q", got, want)
	}
	if err := sc.DecodeOutput("bad", &r); err == nil || !strings.Contains(err.Error(), `output of step "bad" into steps_test.reservation`) {
		t.Errorf("DecodeOutput(bad) error = %v, want a decode error naming the step and type", err)
	}
}

func TestTyped(t *testing.T) {
	h := steps.Typed(func(ctx context.Context, sc steps.Context, in order) (reservation, error) {
		if in.ID == "fail" {
			return reservation{}, errors.New("stock service down")
		}
		return reservation{Warehouse: "EU-" + in.ID}, nil
	})
	tests := []struct {
		name          string
		input         string
		want          string
		wantErr       string
		wantPermanent bool
	}{
		{name: "ok", input: `{"id":"o1"}`, want: `{"warehouse":"EU-o1"}`},
		{name: "handler error passes through", input: `{"id":"fail"}`, wantErr: "stock service down"},
		{name: "invalid json is permanent", input: `{"id":1}`, wantPermanent: true,
			wantErr: `steps: step "reserve": decode input into steps_test.order: json: cannot unmarshal number into Go struct field order.id of type string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := steps.Call(context.Background(), h, steps.Context{Step: "reserve", Input: json.RawMessage(tt.input)})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				if got := steps.IsPermanent(err); got != tt.wantPermanent {
					t.Errorf("IsPermanent = %v, want %v", got, tt.wantPermanent)
				}
				return
			}
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got := string(out); got != tt.want {
				t.Errorf("output = %s, want %s", got, tt.want)
			}
		})
	}
	if steps.Typed[order, order](nil) != nil {
		t.Error("Typed(nil) should be a nil Handler")
	}
}

func TestTypedUnencodableOutput(t *testing.T) {
	h := steps.Typed(func(ctx context.Context, sc steps.Context, in struct{}) (chan int, error) {
		return make(chan int), nil
	})
	_, err := steps.Call(context.Background(), h, steps.Context{Step: "s"})
	if !steps.IsPermanent(err) || !strings.Contains(err.Error(), `steps: step "s": encode output chan int`) {
		t.Errorf("error = %v, want a permanent encode error", err)
	}
}

func TestErrorKinds(t *testing.T) {
	base := errors.New("card declined")
	perm := steps.Permanent(base)
	wrapped := fmt.Errorf("charge: %w", perm)
	retry := steps.RetryAfter(3*time.Second, base)

	tests := []struct {
		name          string
		err           error
		wantPermanent bool
		wantDelay     time.Duration
		wantHasDelay  bool
		wantMsg       string
	}{
		{name: "plain", err: base, wantMsg: "card declined"},
		{name: "permanent", err: perm, wantPermanent: true, wantMsg: "card declined"},
		{name: "wrapped permanent", err: wrapped, wantPermanent: true, wantMsg: "charge: card declined"},
		{name: "permanent nil", err: steps.Permanent(nil), wantPermanent: true, wantMsg: "steps: permanent failure"},
		{name: "retry after", err: retry, wantDelay: 3 * time.Second, wantHasDelay: true, wantMsg: "card declined (retry after 3s)"},
		{name: "retry after negative", err: steps.RetryAfter(-time.Second, nil), wantHasDelay: true, wantMsg: "steps: retry after 0s"},
		{name: "nil", err: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := steps.IsPermanent(tt.err); got != tt.wantPermanent {
				t.Errorf("IsPermanent = %v, want %v", got, tt.wantPermanent)
			}
			if got := errors.Is(tt.err, steps.ErrPermanent); got != tt.wantPermanent {
				t.Errorf("errors.Is(ErrPermanent) = %v, want %v", got, tt.wantPermanent)
			}
			d, ok := steps.RetryDelay(tt.err)
			if d != tt.wantDelay || ok != tt.wantHasDelay {
				t.Errorf("RetryDelay = %v, %v; want %v, %v", d, ok, tt.wantDelay, tt.wantHasDelay)
			}
			if tt.err != nil && tt.err.Error() != tt.wantMsg {
				t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.wantMsg)
			}
		})
	}
	if !errors.Is(perm, base) || !errors.Is(retry, base) {
		t.Error("Permanent and RetryAfter must unwrap to the underlying error")
	}
	var pe *steps.PermanentError
	if !errors.As(wrapped, &pe) || pe.Err != base {
		t.Errorf("errors.As(*PermanentError) = %v", pe)
	}
}

func TestCallRecoversPanic(t *testing.T) {
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		var m map[string]int
		//lint:ignore SA5000 the nil-map write is the panic under test
		m["boom"] = 1
		return nil, nil
	})
	out, err := steps.Call(context.Background(), h, steps.Context{Step: "ship"})
	if out != nil {
		t.Errorf("output = %s, want nil", out)
	}
	var pe *steps.PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("error = %T %v, want *PanicError", err, err)
	}
	if got, want := pe.Error(), "steps: panic: assignment to entry in nil map"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !bytes.Contains(pe.Stack, []byte("TestCallRecoversPanic")) {
		t.Errorf("stack does not show the panicking function:\n%s", pe.Stack)
	}
	if steps.IsPermanent(err) {
		t.Error("a panic should be retried, not permanent")
	}

	// panic(err) unwraps to err, so a handler can panic with a Permanent error.
	h = func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		panic(steps.Permanent(errors.New("corrupt order")))
	}
	_, err = steps.Call(context.Background(), h, steps.Context{})
	if !steps.IsPermanent(err) {
		t.Errorf("panic(Permanent) error = %v, want permanent", err)
	}
}

func TestCallChecks(t *testing.T) {
	_, err := steps.Call(context.Background(), nil, steps.Context{Step: "s"})
	if !errors.Is(err, steps.ErrNilHandler) {
		t.Errorf("Call(nil) error = %v, want ErrNilHandler", err)
	}
	_, err = steps.Call(context.Background(), steps.HandlerFunc(nil), steps.Context{Step: "s"})
	if !errors.Is(err, steps.ErrNilHandler) {
		t.Errorf("Call(HandlerFunc(nil)) error = %v, want ErrNilHandler", err)
	}
	bad := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) {
		return json.RawMessage(`{not json`), nil
	})
	_, err = steps.Call(context.Background(), bad, steps.Context{Step: "s"})
	if !steps.IsPermanent(err) || err.Error() != `steps: step "s": output is not valid JSON` {
		t.Errorf("invalid output error = %v", err)
	}
}

func TestCallFillsContext(t *testing.T) {
	var buf bytes.Buffer
	var got steps.Context
	h := steps.HandlerFunc(func(ctx context.Context, sc steps.Context) (json.RawMessage, error) {
		got = sc
		sc.Logger.Info("hello")
		return nil, nil
	})
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropTime}))
	sc := steps.Context{RunID: "r1", Workflow: "order", Step: "ship", Attempt: 2}.WithLogger(base)
	if _, err := steps.Call(context.Background(), h, sc); err != nil {
		t.Fatal(err)
	}
	if got.IdempotencyKey != "r1/ship" {
		t.Errorf("IdempotencyKey = %q, want %q", got.IdempotencyKey, "r1/ship")
	}
	if want := "level=INFO msg=hello run_id=r1 workflow=order step=ship attempt=2\n"; buf.String() != want {
		t.Errorf("log = %q, want %q", buf.String(), want)
	}

	// A zero Context gets a discarding logger, never nil.
	if _, err := steps.Call(context.Background(), h, steps.Context{}); err != nil {
		t.Fatal(err)
	}
	if got.Logger == nil {
		t.Error("Logger is nil inside a handler run by Call")
	}
}

func dropTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

func TestRegistry(t *testing.T) {
	noop := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
	r := steps.NewRegistry()
	tests := []struct {
		name    string
		h       steps.Handler
		wantIs  error
		wantMsg string
	}{
		{name: "order.reserve", h: noop},
		{name: "ship", h: noop},
		{name: "ship", h: noop, wantIs: steps.ErrDuplicateHandler, wantMsg: `steps: register "ship": handler already registered`},
		{name: "nil", h: nil, wantIs: steps.ErrNilHandler, wantMsg: `steps: register "nil": nil handler`},
		{name: "nilfunc", h: steps.HandlerFunc(nil), wantIs: steps.ErrNilHandler, wantMsg: `steps: register "nilfunc": nil handler`},
		{name: "", h: noop, wantIs: steps.ErrInvalidHandlerName},
		{name: "9lives", h: noop, wantIs: steps.ErrInvalidHandlerName},
		{name: "has space", h: noop, wantIs: steps.ErrInvalidHandlerName,
			wantMsg: `steps: register "has space": invalid handler name (want a letter followed by up to 127 letters, digits, '_', '-' or '.')`},
		{name: strings.Repeat("a", 129), h: noop, wantIs: steps.ErrInvalidHandlerName},
	}
	for _, tt := range tests {
		err := r.Register(tt.name, tt.h)
		if !errors.Is(err, tt.wantIs) || (tt.wantIs == nil) != (err == nil) {
			t.Errorf("Register(%q) error = %v, want %v", tt.name, err, tt.wantIs)
		}
		if tt.wantMsg != "" && (err == nil || err.Error() != tt.wantMsg) {
			t.Errorf("Register(%q) error = %v, want %q", tt.name, err, tt.wantMsg)
		}
	}
	if diff := cmp.Diff([]string{"order.reserve", "ship"}, r.Names()); diff != "" {
		t.Errorf("Names mismatch (-want +got):\n%s", diff)
	}
	if _, ok := r.Lookup("ship"); !ok {
		t.Error("Lookup(ship) not found")
	}
	if _, ok := r.Lookup("pack"); ok {
		t.Error("Lookup(pack) found")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("MustRegister of a duplicate did not panic")
			}
		}()
		r.MustRegister("ship", noop)
	}()
}

func TestRegistryConcurrent(t *testing.T) {
	r := steps.NewRegistry()
	noop := steps.HandlerFunc(func(context.Context, steps.Context) (json.RawMessage, error) { return nil, nil })
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = r.Register(fmt.Sprintf("h%d", i), noop)
			r.Lookup("h0")
			r.Names()
		}()
	}
	wg.Wait()
	if got := len(r.Names()); got != 8 {
		t.Errorf("len(Names) = %d, want 8", got)
	}
}
