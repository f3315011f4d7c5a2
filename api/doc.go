// Package api is dagflow's HTTP JSON API, as an http.Handler to mount in
// your own binary (as `dagflow serve` and `dagflow dev` do):
//
//	h := api.NewHandler(e, api.Options{Logger: log})
//	srv := &http.Server{Addr: ":8080", Handler: h, ReadHeaderTimeout: 5 * time.Second}
//
// It serves /v1 (workflows and their graphs, triggering runs with an
// Idempotency-Key, runs, dead letters, schedules, queues), /healthz,
// /readyz and /openapi.yaml, the OpenAPI 3.1 description that the tests
// validate every request and answer against. Routes lists every route
// and the scope it needs.
//
// Errors are RFC 9457 problem details (application/problem+json) with a
// machine-readable code and, when there is one, the run they are about.
//
// Every /v1 route needs a bearer API key ("Authorization: Bearer dfk_...")
// of a scope that allows it: read < operate (trigger, cancel, retry) <
// admin (schedules). CreateKey makes a key and stores only its SHA-256;
// RevokeKey revokes one. A key found valid is trusted for up to a second
// without asking the store again, so a revocation takes effect within a
// second. Options.AllowAnonymous lets requests without a key in, with the
// admin scope: for a loopback listener only.
//
// Package api/client is a Go client of this API.
package api
