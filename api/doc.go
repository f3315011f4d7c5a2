// Package api is dagflow's HTTP JSON API, as an http.Handler to mount in
// your own binary (as `dagflow serve` and `dagflow dev` do):
//
//	h := api.NewHandler(e, api.Options{Logger: log})
//	srv := &http.Server{Addr: ":8080", Handler: h, ReadHeaderTimeout: 5 * time.Second}
//	srv.RegisterOnShutdown(h.CloseStreams) // ends the dashboard's event streams
//
// It serves /v1 (workflows and their graphs, triggering runs with an
// Idempotency-Key, runs, dead letters, schedules, queues), /healthz,
// /readyz and /openapi.yaml, the OpenAPI 3.1 description that the tests
// validate every request and answer against. Routes lists every route
// and the scope it needs.
//
// Errors are RFC 9457 problem details (application/problem+json) with a
// machine-readable code (the Code constants, which are package client's)
// and, when there is one, the run they are about. A request whose client
// went away is answered nothing, and logged at debug level.
//
// Every /v1 route needs a bearer API key ("Authorization: Bearer dfk_...")
// of a scope that allows it: read < operate (trigger, cancel, retry) <
// admin (pause, resume and trigger schedules; create, list and revoke API
// keys). CreateKey makes a key and stores only its SHA-256; RevokeKey
// revokes one, by id, name or (for a leaked key) its secret. A token that
// is not "dfk_" and 43 base64url characters is refused without a store
// query. A key found valid is trusted for up to a second without asking
// the store again, so a revocation takes effect within a second.
//
// Options.AllowAnonymous lets requests without a key in, with the admin
// scope, for a loopback listener only, and only while the store holds no
// key: a key created while the server runs turns authentication on within
// a second. Even then it takes only requests whose Host is loopback or
// localhost, no POST or DELETE from another site, and no /v1 write
// without Content-Type application/json or an X-Dagflow-Request header
// (which another origin's page cannot send without a CORS preflight), so
// that a web page cannot drive it (DNS rebinding, cross-site and
// cross-port requests). Anything that
// makes the listener reachable by others, such as a reverse proxy or a
// tunnel in front of it, makes it reachable without a key: create a key
// first.
//
// Options.BasePath is the prefix a server strips before the handler (for
// Location headers). Every answer carries "X-Content-Type-Options:
// nosniff", and /v1 answers "Cache-Control: no-store".
//
// The web dashboard (package api/dashboard) is served at / beside the
// API, under the same keys: a login form exchanges a key for a session
// cookie, and keyless loopback mode lets pages in as it lets /v1 in.
// Options.NoDashboard turns it off; Options.Redact filters the inputs
// and outputs its pages show.
//
// Package api/client is a Go client of this API.
package api
