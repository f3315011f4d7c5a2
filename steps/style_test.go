package steps_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/steps"
)

// Every sentinel of the package reads "steps: ..." on its own; the
// messages wrapping one name the step or handler without repeating the
// prefix (see also TestRegistry and TestDecodeOutput).
func TestErrorStyle(t *testing.T) {
	for _, s := range []error{steps.ErrPermanent, steps.ErrNilHandler, steps.ErrNoOutput,
		steps.ErrDuplicateHandler, steps.ErrInvalidHandlerName} {
		if !strings.HasPrefix(s.Error(), "steps: ") {
			t.Errorf("sentinel %q does not start with \"steps: \"", s)
		}
	}
	_, err := steps.Call(context.Background(), nil, steps.Context{Step: "ship"})
	if got, want := err.Error(), `steps: step "ship": nil handler`; got != want || !errors.Is(err, steps.ErrNilHandler) {
		t.Errorf("Call(nil) error = %q (errors.Is ErrNilHandler: %v), want %q", got, errors.Is(err, steps.ErrNilHandler), want)
	}
}
