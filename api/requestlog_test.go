package api_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/dagflow/dagflow/api"
)

// TestRequestLogLevels: scrapes of /metrics and the health and
// readiness probes are logged at Debug, the API's requests at Info.
func TestRequestLogLevels(t *testing.T) {
	b := backends()[0] // the log does not depend on the store
	env := newAPIEnv(t, b, envOptions{configure: func(o *api.Options) {
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("up 1\n")) })
	}})
	for _, path := range []string{"/metrics", "/healthz", "/readyz", "/v1/runs"} {
		// /metrics is outside the spec: not through the contract check.
		resp, err := http.Get(env.srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	logs := env.logs.String()
	for path, level := range map[string]string{"/metrics": "DEBUG", "/healthz": "DEBUG", "/readyz": "DEBUG", "/v1/runs": "INFO"} {
		re := regexp.MustCompile(`(?m)level=` + level + ` msg="api: request" method=GET path=` + regexp.QuoteMeta(path) + ` status=200`)
		if !re.MatchString(logs) {
			t.Errorf("GET %s is not logged at %s:\n%s", path, level, logs)
		}
	}
}
