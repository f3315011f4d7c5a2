package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/api/dashboard"
)

// dashboardConfig hands the dashboard the API's authentication (the same
// keys, cache and keyless loopback mode), the queue listing and the
// redaction hook.
func (s *server) dashboardConfig() dashboard.Config {
	return dashboard.Config{
		Engine:        s.e,
		Logger:        s.log,
		BasePath:      s.o.BasePath,
		Now:           s.o.Now,
		Redact:        s.o.Redact,
		Authenticate:  s.dashboardKey,
		AnonymousOpen: s.dashboardAnonymous,
		Queues:        s.queueList,
		SecureCookie:  s.o.DashboardSecureCookie,
	}
}

// dashboardKey checks a key's secret as a bearer token would be checked.
func (s *server) dashboardKey(ctx context.Context, secret string) (dashboard.Principal, error) {
	p, ae := s.auth.authenticate(ctx, "Bearer "+secret)
	if ae != nil {
		if ae.status == http.StatusUnauthorized {
			return dashboard.Principal{}, fmt.Errorf("%w: %s", dashboard.ErrUnknownKey, ae.detail)
		}
		if ae.err != nil {
			return dashboard.Principal{}, ae.err
		}
		return dashboard.Principal{}, errors.New(ae.detail)
	}
	return dashboard.Principal{KeyID: p.keyID, Name: p.name, Scope: p.scope}, nil
}

// dashboardAnonymous: pages need no login where /v1 needs no key, with
// the same checks of the request (a loopback Host; no cross-site POST).
func (s *server) dashboardAnonymous(r *http.Request) (bool, error) {
	open, ae := s.auth.anonymousOpen(r.Context())
	if ae != nil {
		if ae.err != nil {
			return false, ae.err
		}
		return false, errors.New(ae.detail)
	}
	if !open {
		return false, nil
	}
	if ae := checkLocalRequest(r); ae != nil {
		return false, errors.New(ae.detail)
	}
	return true, nil
}

// queueList is GET /v1/queues's listing, for the dashboard.
func (s *server) queueList(ctx context.Context) ([]client.Queue, error) {
	names, err := s.queueNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]client.Queue, 0, len(names))
	for _, name := range names {
		d, err := s.e.QueueDepth(ctx, name)
		if err != nil {
			return nil, err
		}
		out = append(out, s.toQueue(d))
	}
	return out, nil
}
