package dashboard_test

import (
	"context"
	"strings"
	"testing"

	"github.com/dagflow/dagflow/api/dashboard"
	"github.com/dagflow/dagflow/engine"
)

// TestNewRefusesANilEngine: a nil Config.Engine, and a nil *engine.Engine
// in it, are refused with an error that names the field, not left to
// panic at the first page.
func TestNewRefusesANilEngine(t *testing.T) {
	auth := func(context.Context, string) (dashboard.Principal, error) { return dashboard.Principal{}, nil }
	var typedNil *engine.Engine
	for name, e := range map[string]dashboard.Engine{"nil": nil, "nil *engine.Engine": typedNil} {
		_, err := dashboard.New(dashboard.Config{Engine: e, Authenticate: auth})
		if err == nil || !strings.Contains(err.Error(), "Config.Engine") {
			t.Errorf("%s: New = %v, want an error naming Config.Engine", name, err)
		}
	}
}
