package api

import (
	"context"
	_ "embed"
	"net/http"
	"time"

	"github.com/dagflow/dagflow/api/client"
)

// spec is the OpenAPI 3.1 description of the API.
//
//go:embed openapi.yaml
var spec []byte

// OpenAPI returns the OpenAPI 3.1 description of the API (api/openapi.yaml).
func OpenAPI() []byte { return append([]byte(nil), spec...) }

// readyTimeout bounds each dependency check of /readyz.
const readyTimeout = 2 * time.Second

// healthz answers 200 while the process serves: GET /healthz.
func (s *server) healthz(w http.ResponseWriter, r *http.Request) error {
	return writeJSON(w, http.StatusOK, client.Health{Status: "ok"})
}

// readyz answers 200 when the store and Redis answer, else 503 naming the
// one that failed (the cause, which may name hosts, goes to the log, not
// to this unauthenticated answer): GET /readyz.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) error {
	checks := map[string]string{"store": "ok", "redis": "ok"}
	status := http.StatusOK
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	storeErr, redisErr := s.e.Ping(ctx)
	for name, err := range map[string]error{"store": storeErr, "redis": redisErr} {
		if err != nil {
			checks[name] = "failed (the server log has the cause)"
			status = http.StatusServiceUnavailable
			s.log.WarnContext(r.Context(), "api: not ready", "dependency", name, "err", err)
		}
	}
	h := client.Health{Status: "ok", Checks: checks}
	if status != http.StatusOK {
		h.Status = "unavailable"
	}
	return writeJSON(w, status, h)
}

// openAPI serves the spec: GET /openapi.yaml.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	w.Write(spec)
	return nil
}
