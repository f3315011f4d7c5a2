package api_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/persistence"
)

// keyStore returns the env's store as a KeyStore.
func keyStore(t testing.TB, env *apiEnv) api.KeyStore {
	t.Helper()
	ks, ok := env.Store.(api.KeyStore)
	if !ok {
		t.Fatalf("store %T keeps no API keys", env.Store)
	}
	return ks
}

// newKey creates a key and returns its secret.
func newKey(t testing.TB, env *apiEnv, name string, scope api.Scope) string {
	t.Helper()
	secret, k, err := api.CreateKey(context.Background(), keyStore(t, env), name, string(scope), env.Clock.Now())
	if err != nil {
		t.Fatalf("create key %s: %v", name, err)
	}
	if k.Name != name || k.Scope != string(scope) {
		t.Fatalf("key %+v", k)
	}
	return secret
}

func TestAuth(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{keys: true})
		ctx := context.Background()
		ks := keyStore(t, env)
		readKey := newKey(t, env, "dash", api.ScopeRead)
		opKey := newKey(t, env, "ci", api.ScopeOperate)
		adminKey := newKey(t, env, "ops.admin", api.ScopeAdmin)
		secrets := []string{readKey, opKey, adminKey}

		// The secret: "dfk_" and 43 characters; stored as its SHA-256
		// with a 12-character hint.
		keys, err := api.ListKeys(ctx, ks)
		if err != nil || len(keys) != 3 {
			t.Fatalf("keys = %+v, %v", keys, err)
		}
		for i, k := range keys {
			s := secrets[i]
			sum := sha256.Sum256([]byte(s))
			if !strings.HasPrefix(s, "dfk_") || len(s) != 47 || k.Hint != s[:12] || string(k.Hash) != string(sum[:]) || k.RevokedAt != nil {
				t.Fatalf("key %d: secret %d chars, stored %+v", i, len(s), k)
			}
		}

		read, op, admin := env.client(t, readKey), env.client(t, opKey), env.client(t, adminKey)
		env.adminClient = admin

		// No key: 401 with a Bearer challenge, on every /v1 route.
		r := env.raw(t, "GET", "/v1/runs", "")
		r.problem(t, 401, api.CodeUnauthorized)
		if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
		}
		for _, rt := range api.Routes() {
			if rt.Scope == "" {
				continue
			}
			path := strings.NewReplacer("{name}", "order", "{id}", "x", "{run}", "x", "{step}", "charge").Replace(rt.Path)
			env.raw(t, rt.Method, path, "").problem(t, 401, api.CodeUnauthorized)
		}
		_, err = env.anon.ListRuns(ctx, client.RunFilter{})
		problemOf(t, err, 401, api.CodeUnauthorized)
		// A header that is not a bearer key, and an unknown key.
		env.raw(t, "GET", "/v1/runs", "", "Authorization: Basic dXNlcjpwYXNz").problem(t, 401, api.CodeUnauthorized)
		unknown := "dfk_" + strings.Repeat("A", 43)
		p := env.raw(t, "GET", "/v1/runs", "", "Authorization: Bearer "+unknown).problem(t, 401, api.CodeUnauthorized)
		if strings.Contains(p.Detail, "AAAA") {
			t.Fatalf("the problem repeats the key: %q", p.Detail)
		}
		// Public routes need no key.
		if _, err := env.anon.Healthz(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := env.anon.Readyz(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := env.anon.OpenAPI(ctx); err != nil {
			t.Fatal(err)
		}

		// read reads, and gets 403 on a POST.
		if _, err := read.ListRuns(ctx, client.RunFilter{}); err != nil {
			t.Fatalf("read key lists runs: %v", err)
		}
		r = env.raw(t, "POST", "/v1/workflows/order/runs", `{}`, "Authorization: Bearer "+readKey)
		p = r.problem(t, 403, api.CodeForbidden)
		if !strings.Contains(r.header.Get("WWW-Authenticate"), `error="insufficient_scope"`) || !strings.Contains(p.Detail, "operate") {
			t.Fatalf("403: %q %q", r.header.Get("WWW-Authenticate"), p.Detail)
		}
		_, _, err = read.Trigger(ctx, "order", client.TriggerRequest{})
		problemOf(t, err, 403, api.CodeForbidden)
		_, err = read.CancelRun(ctx, "x")
		problemOf(t, err, 403, api.CodeForbidden)

		// operate triggers, cancels and retries, and gets 403 on schedules.
		run, created, err := op.Trigger(ctx, "order", client.TriggerRequest{})
		if err != nil || !created {
			t.Fatalf("operate key triggers: %v", err)
		}
		env.waitStatus(t, run.ID, "succeeded")
		_, err = op.PauseSchedule(ctx, "nightly")
		problemOf(t, err, 403, api.CodeForbidden)
		// admin gets past the scope check (the schedule does not exist).
		_, err = admin.PauseSchedule(ctx, "nightly")
		problemOf(t, err, 404, api.CodeScheduleNotFound)

		// A revoked key: the cache trusts it for at most a second.
		rk, err := api.RevokeKey(ctx, ks, "ci", env.Clock.Now())
		if err != nil || rk.RevokedAt == nil || rk.Name != "ci" {
			t.Fatalf("revoke = %+v, %v", rk, err)
		}
		if _, err := op.ListRuns(ctx, client.RunFilter{}); err != nil {
			t.Fatalf("within the cache's second: %v", err)
		}
		env.Clock.Advance(1100 * time.Millisecond)
		_, err = op.ListRuns(ctx, client.RunFilter{})
		p2 := problemOf(t, err, 401, api.CodeUnauthorized)
		if !strings.Contains(p2.Detail, "revoked") {
			t.Fatalf("revoked: %q", p2.Detail)
		}
		// By id too; unknown keys are errors.
		if _, err := api.RevokeKey(ctx, ks, keys[0].ID, env.Clock.Now()); err != nil {
			t.Fatal(err)
		}
		env.Clock.Advance(1100 * time.Millisecond)
		_, err = read.ListRuns(ctx, client.RunFilter{})
		problemOf(t, err, 401, api.CodeUnauthorized)
		if _, err := api.RevokeKey(ctx, ks, "nobody", env.Clock.Now()); !errors.Is(err, persistence.ErrAPIKeyNotFound) {
			t.Fatalf("revoke unknown = %v", err)
		}
		keys, err = api.ListKeys(ctx, ks)
		if err != nil || len(keys) != 3 || keys[0].RevokedAt == nil || keys[1].RevokedAt == nil || keys[2].RevokedAt != nil {
			t.Fatalf("keys after revoking two = %+v, %v", keys, err)
		}
		// The name of a revoked key can be used again.
		newKey(t, env, "ci", api.ScopeOperate)

		// Keys never reach the log.
		logs := env.logs.String()
		if !strings.Contains(logs, "key=ops.admin") {
			t.Fatalf("the log does not name the keys: %s", logs)
		}
		for _, s := range append(secrets, unknown, "Bearer", "Authorization", "dXNlcjpwYXNz") {
			if strings.Contains(logs, s) {
				t.Fatalf("the log holds %q:\n%s", s, logs)
			}
		}
	})
}

func TestCreateKeyRefuses(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{keys: true})
	ks := keyStore(t, env)
	ctx := context.Background()
	newKey(t, env, "ci", api.ScopeOperate)
	for _, tc := range []struct{ name, scope, want string }{
		{"", "read", "length 0"},
		{"a b", "read", "' '"},
		{strings.Repeat("n", 101), "read", "length 101"},
		{"ok", "root", `scope "root"`},
	} {
		_, _, err := api.CreateKey(ctx, ks, tc.name, tc.scope, env.Clock.Now())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CreateKey(%q, %q) = %v, want an error with %q", tc.name, tc.scope, err, tc.want)
		}
	}
	if _, _, err := api.CreateKey(ctx, ks, "ci", "read", env.Clock.Now()); !errors.Is(err, persistence.ErrAPIKeyExists) {
		t.Fatalf("a second key named ci = %v, want ErrAPIKeyExists", err)
	}
}

// TestAnonymous: AllowAnonymous lets requests without a header in, with
// the admin scope, but still checks a key that is sent.
func TestAnonymous(t *testing.T) {
	env := newAPIEnv(t, backends()[0], envOptions{})
	ctx := context.Background()
	if _, err := env.anon.PauseSchedule(ctx, "nightly"); !strings.Contains(err.Error(), "schedule_not_found") {
		t.Fatalf("anonymous admin route = %v, want past the scope check", err)
	}
	env.raw(t, "GET", "/v1/runs", "", "Authorization: Bearer dfk_nope").problem(t, http.StatusUnauthorized, api.CodeUnauthorized)
}

func TestKeyEndpoints(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		env := newAPIEnv(t, b, envOptions{keys: true})
		ctx := context.Background()
		admin := env.client(t, newKey(t, env, "root", api.ScopeAdmin))
		env.adminClient = admin
		op := env.client(t, newKey(t, env, "ci", api.ScopeOperate))

		created, err := admin.CreateAPIKey(ctx, "dash", "read")
		if err != nil || !strings.HasPrefix(created.Secret, "dfk_") || created.Hint != created.Secret[:12] || created.Scope != "read" {
			t.Fatalf("create = %+v, %v", created, err)
		}
		dash := env.client(t, created.Secret)
		if _, err := dash.ListRuns(ctx, client.RunFilter{}); err != nil {
			t.Fatalf("the new key reads: %v", err)
		}
		_, err = dash.ListAPIKeys(ctx)
		problemOf(t, err, 403, api.CodeForbidden)
		_, err = op.CreateAPIKey(ctx, "x", "admin")
		problemOf(t, err, 403, api.CodeForbidden)

		keys, err := admin.ListAPIKeys(ctx)
		if err != nil || len(keys) != 3 || keys[2].Name != "dash" || keys[2].Hint != created.Hint {
			t.Fatalf("list = %+v, %v", keys, err)
		}
		raw := env.raw(t, "GET", "/v1/api-keys", "", "Authorization: Bearer "+created.Secret)
		raw.problem(t, 403, api.CodeForbidden)

		_, err = admin.CreateAPIKey(ctx, "dash", "read")
		problemOf(t, err, 409, api.CodeConflict)
		_, err = admin.CreateAPIKey(ctx, "a b", "read")
		problemOf(t, err, 400, api.CodeInvalidName)
		_, err = admin.CreateAPIKey(ctx, "ok", "root")
		problemOf(t, err, 400, api.CodeInvalidParameter)
		env.raw(t, "POST", "/v1/api-keys", `{"name":"ok","scope":"read","extra":1}`).problem(t, 401, api.CodeUnauthorized)

		rk, err := admin.RevokeAPIKey(ctx, "dash")
		if err != nil || rk.RevokedAt == nil {
			t.Fatalf("revoke = %+v, %v", rk, err)
		}
		env.Clock.Advance(1100 * time.Millisecond)
		_, err = dash.ListRuns(ctx, client.RunFilter{})
		problemOf(t, err, 401, api.CodeUnauthorized)
		_, err = admin.RevokeAPIKey(ctx, "nobody")
		problemOf(t, err, 404, api.CodeNotFound)
		_, err = admin.RevokeAPIKey(ctx, "a b")
		problemOf(t, err, 400, api.CodeInvalidName)
		if strings.Contains(env.logs.String(), created.Secret) {
			t.Fatal("the log holds a created key's secret")
		}
	})
}
