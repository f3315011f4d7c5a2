// Package dashboard is dagflow's web dashboard: server-rendered pages
// (html/template, embedded with the CSS and a small hand-written
// JavaScript file, no third-party assets) over an engine, with live
// updates over Server-Sent Events. Package api serves it at "/" beside
// the JSON API (unless api.Options.NoDashboard); it is not meant to be mounted on
// its own, though New makes it an http.Handler like any other.
//
// Pages: the overview (runs started, finished and failed per minute,
// steps per second, queue depths, dead letters, live nodes, as small
// charts), runs (filters, search by run id or idempotency key, keyset
// paging, bulk cancel and retry by selection or by filter), a run (its
// DAG drawn as SVG, laid out on the server, each step coloured by its
// state; a waterfall of its attempts; a step panel with attempts,
// errors, input, output, idempotency key, worker and why the step is
// waiting; the operator controls: pause and resume, retry failed steps,
// rerun from a step, skip a dead step with an output; the run's history
// of those actions), workflows (each version's graph, its schedules, a
// form that triggers a run), dead letters, schedules (with a form that
// creates or edits one), queues (pause and resume) and nodes.
//
// Security: a person logs in with an API key (the same keys as the API,
// checked by Config.Authenticate), which the dashboard exchanges for a
// random session id in an HttpOnly, SameSite=Strict cookie (Secure over
// TLS). The key stays in the server's memory and is checked again at
// most a second old on every request, so revoking it ends its sessions
// within a second. Every state-changing request carries the session's
// CSRF token and, when the browser sends one, a same-origin Origin; a
// read key's pages show no action, and the server refuses actions above
// the session's scope with 403. Where Config.AnonymousOpen lets requests
// in without a key (loopback, no key in the store), pages need no login
// but actions still need the CSRF token. Every input and output shown
// passes through Config.Redact first. Pages carry a Content-Security-
// Policy that allows no inline script.
//
// Live updates: each open page holds one event stream (/events); one
// change detector per Dashboard polls the store's change feed
// (persistence.ChangeFeed: one index range a poll, whatever the number of
// streams) and tells the streams which runs changed; a page then fetches
// its own content again. Streams get a heartbeat comment every 15 s; the
// script falls back to polling when the stream fails.
package dashboard
