package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/api"
	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/examples/orderflow"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/steps"
	"github.com/dagflow/dagflow/workflows"
)

// buildDagflow builds the command into a temporary directory.
func buildDagflow(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "dagflow")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// apiURL finds the API's URL in what serve or dev printed.
var apiURL = regexp.MustCompile(`API on (http://[^\s]+)`)

// waitURL waits for the command to print the API's URL.
func waitURL(t *testing.T, out, errb *syncBuffer) string {
	t.Helper()
	var u string
	testenv.Eventually(t, 30*time.Second, func() bool {
		if m := apiURL.FindStringSubmatch(out.String()); m != nil {
			u = m[1]
		}
		return u != ""
	}, "no API URL printed; stdout %s, stderr %s", out, errb)
	return u
}

// get requests u with the key (none when empty) and returns the status
// and the body.
func get(t *testing.T, method, u, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// serveEnv is a private MySQL database and Redis prefix, migrated, with
// the connection flags for them.
type serveEnv struct {
	dsn, addr, prefix string
	flags             []string
	store             persistence.Store
	rdb               *redis.Client
}

func newServeEnv(t *testing.T, ctx context.Context) *serveEnv {
	t.Helper()
	addr := testenv.RequireRedis(t)
	dsn := testenv.MySQLDatabase(t)
	prefix := testenv.KeyPrefix(t)
	store, err := mysql.Open(ctx, mysql.Config{DSN: dsn, AutoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { rdb.Close() })
	testenv.DeleteKeys(t, rdb, prefix)
	return &serveEnv{dsn: dsn, addr: addr, prefix: prefix, store: store, rdb: rdb,
		flags: []string{"--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", prefix}}
}

// startServe runs `dagflow serve` with args in this process until the
// test ends; it returns the API's URL and the command's output.
func (env *serveEnv) startServe(t *testing.T, ctx context.Context, args ...string) (string, *syncBuffer, func() int) {
	t.Helper()
	sctx, stop := context.WithCancel(ctx)
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, append(append([]string{"serve"}, args...), env.flags...), &out, &errb)
	}()
	exited := false
	var code int
	wait := func() int {
		if !exited {
			stop()
			code, exited = <-done, true
		}
		return code
	}
	t.Cleanup(func() { wait() })
	return waitURL(t, &out, &errb), &errb, wait
}

// TestServeOnLoopbackWithoutKey: with no API key in the store, serve on a
// loopback address serves /v1 without a key, says so, and stops cleanly.
func TestServeOnLoopbackWithoutKey(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	u, errb, stop := env.startServe(t, ctx, "--listen", "127.0.0.1:0", "--demo")
	if code, body := get(t, "GET", u+"/v1/workflows", "", ""); code != http.StatusOK || !strings.Contains(body, `"order"`) {
		t.Errorf("GET /v1/workflows without a key: %d %s; want 200 listing order", code, body)
	}
	if code, body := get(t, "GET", u+"/healthz", "", ""); code != http.StatusOK {
		t.Errorf("GET /healthz: %d %s", code, body)
	}
	code, body := get(t, "POST", u+"/v1/workflows/order/runs", "", `{"input":{"order_id":"o-1","customer":"c@example.com","sku":"SKU-1","quantity":1,"total":150}}`)
	if code != http.StatusCreated {
		t.Fatalf("POST /v1/workflows/order/runs: %d %s", code, body)
	}
	var r client.Run
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() bool {
		run, err := env.store.RunGet(ctx, r.ID)
		return err == nil && run.Status == persistence.RunSucceeded
	}, "the run triggered over HTTP did not succeed on serve's workers")

	// A key created while serve runs turns authentication on, without a
	// restart.
	key, _ := createKey(t, ctx, env.flags, "read", "late")
	testenv.Eventually(t, 10*time.Second, func() bool {
		code, _ := get(t, "GET", u+"/v1/runs", "", "")
		return code == http.StatusUnauthorized
	}, "serve still lets requests without a key in after a key was created")
	if code, body := get(t, "GET", u+"/v1/runs", key, ""); code != http.StatusOK {
		t.Errorf("GET /v1/runs with the new key: %d %s", code, body)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d after its context ended:\n%s", code, errb)
	}
	if !strings.Contains(errb.String(), "without authentication") {
		t.Errorf("serve did not log that it serves without keys:\n%s", errb)
	}
}

// TestServeWithoutWorkers: serve --no-workers registers nothing: it
// knows the workflows from the stored definitions, triggers them, and runs
// no step of them.
func TestServeWithoutWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	storeDefinitions(t, ctx, env)
	u, errb, stop := env.startServe(t, ctx, "--listen", "127.0.0.1:0", "--no-workers")
	code, body := get(t, "GET", u+"/v1/workflows", "", "")
	var list client.WorkflowList
	if err := json.Unmarshal([]byte(body), &list); code != http.StatusOK || err != nil || len(list.Workflows) == 0 {
		t.Fatalf("GET /v1/workflows: %d %s (%v)", code, body, err)
	}
	for _, w := range list.Workflows {
		if w.Handlers {
			t.Errorf("serve --no-workers has the handlers of %s", w.Name)
		}
	}
	code, body = get(t, "POST", u+"/v1/workflows/order/runs", "", `{"input":{"order_id":"o-1","customer":"c@example.com","sku":"SKU-1","quantity":1,"total":150}}`)
	var r client.Run
	if err := json.Unmarshal([]byte(body), &r); code != http.StatusCreated || err != nil {
		t.Fatalf("POST /v1/workflows/order/runs: %d %s", code, body)
	}
	time.Sleep(time.Second) // long enough for a worker, were there one, to take the first step
	sts, err := env.store.StepList(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sts {
		if s.Attempt > 0 {
			t.Errorf("serve --no-workers ran step %s (attempt %d, %s)", s.Step, s.Attempt, s.Status)
		}
	}
	if code := stop(); code != 0 {
		t.Errorf("serve --no-workers exited %d:\n%s", code, errb)
	}
}

// TestServeRefusesPublicAddressWithoutKey: with no API key in the store,
// serve does not listen on an address that is not loopback.
func TestServeRefusesPublicAddressWithoutKey(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	for _, listen := range []string{"0.0.0.0:0", ":0"} {
		code, out, errb := runCLI(t, ctx, append([]string{"serve", "--listen", listen}, env.flags...)...)
		if code != 1 || !strings.Contains(errb, "not a loopback address") || !strings.Contains(errb, "dagflow apikeys create") {
			t.Errorf("serve --listen %s with no key: exit %d, stdout %q, stderr %q; want 1 and a refusal saying to create a key", listen, code, out, errb)
		}
		if strings.Contains(out, "API on") {
			t.Errorf("serve --listen %s with no key listened: %s", listen, out)
		}
	}
	code, _, errb := runCLI(t, ctx, append([]string{"serve", "--listen", "no-port"}, env.flags...)...)
	if code != 2 || !strings.Contains(errb, `--listen "no-port"`) {
		t.Errorf("serve --listen no-port: exit %d, %q; want a usage error naming the address", code, errb)
	}
	code, _, errb = runCLI(t, ctx, append([]string{"serve", "--no-workers", "--queues", "default"}, env.flags...)...)
	if code != 2 || !strings.Contains(errb, "--no-workers") {
		t.Errorf("serve --no-workers --queues: exit %d, %q; want a usage error", code, errb)
	}
}

// createKey runs apikeys create and returns the secret and the key's id.
func createKey(t *testing.T, ctx context.Context, flags []string, scope, name string) (secret, id string) {
	t.Helper()
	code, out, errb := runCLI(t, ctx, append([]string{"apikeys", "create", "--scope", scope, "--name", name}, flags...)...)
	if code != 0 {
		t.Fatalf("apikeys create exited %d: %s %s", code, out, errb)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "secret" {
			secret = f[1]
		}
		if len(f) == 2 && f[0] == "id" {
			id = f[1]
		}
	}
	if !strings.HasPrefix(secret, "dfk_") || id == "" {
		t.Fatalf("apikeys create printed no secret or id:\n%s", out)
	}
	return secret, id
}

// TestServeWithAPIKeys: keys made by `apikeys create` are required once
// one exists (also on a public address), scopes are enforced, a revoked
// key is refused, and neither listings nor logs show a secret.
func TestServeWithAPIKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	readKey, _ := createKey(t, ctx, env.flags, "read", "dashboard")
	opKey, opID := createKey(t, ctx, env.flags, "operate", "ci")

	code, out, errb := runCLI(t, ctx, append([]string{"apikeys", "create", "--scope", "operate", "--name", "ci"}, env.flags...)...)
	if code != 1 || !strings.Contains(errb, `"ci"`) {
		t.Errorf("a second key named ci: exit %d, %q %q; want 1 naming it", code, out, errb)
	}
	for _, args := range [][]string{
		{"apikeys", "create", "--scope", "root", "--name", "x"},
		{"apikeys", "create", "--scope", "read", "--name", "bad name"},
		{"apikeys", "create", "--scope", "read"},
	} {
		if code, _, errb := runCLI(t, ctx, append(args, env.flags...)...); code != 2 || !strings.Contains(errb, "--") {
			t.Errorf("%q: exit %d, %q; want a usage error naming the flag", args, code, errb)
		}
	}

	code, list, errb := runCLI(t, ctx, append([]string{"apikeys", "list"}, env.flags...)...)
	if code != 0 || !strings.Contains(list, "dashboard") || !strings.Contains(list, "ci") || !strings.Contains(list, opKey[:12]) {
		t.Fatalf("apikeys list: exit %d, %q %q; want both keys with their hints", code, list, errb)
	}
	if strings.Contains(list, readKey) || strings.Contains(list, opKey) {
		t.Fatalf("apikeys list shows a secret:\n%s", list)
	}

	u, serveErr, stop := env.startServe(t, ctx, "--listen", "0.0.0.0:0", "--demo")
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	u = "http://127.0.0.1:" + pu.Port()
	if code, body := get(t, "GET", u+"/v1/runs", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /v1/runs without a key: %d %s; want 401", code, body)
	}
	if code, body := get(t, "GET", u+"/v1/runs", readKey, ""); code != http.StatusOK {
		t.Errorf("GET /v1/runs with the read key: %d %s; want 200", code, body)
	}
	if code, body := get(t, "GET", u+"/healthz", "", ""); code != http.StatusOK {
		t.Errorf("GET /healthz without a key: %d %s; want 200", code, body)
	}
	order := `{"input":{"order_id":"o-1","customer":"c@example.com","sku":"SKU-1","quantity":1,"total":150}}`
	if code, body := get(t, "POST", u+"/v1/workflows/order/runs", readKey, order); code != http.StatusForbidden {
		t.Errorf("POST a run with the read key: %d %s; want 403", code, body)
	}
	if code, body := get(t, "POST", u+"/v1/workflows/order/runs", opKey, order); code != http.StatusCreated {
		t.Errorf("POST a run with the operate key: %d %s; want 201", code, body)
	}

	code, out, errb = runCLI(t, ctx, append([]string{"apikeys", "revoke", "ci"}, env.flags...)...)
	if code != 0 || !strings.Contains(out, opID) {
		t.Fatalf("apikeys revoke ci: exit %d, %q %q", code, out, errb)
	}
	testenv.Eventually(t, 10*time.Second, func() bool {
		code, _ := get(t, "GET", u+"/v1/runs", opKey, "")
		return code == http.StatusUnauthorized
	}, "the revoked key is still let in")
	if code, again, errb := runCLI(t, ctx, append([]string{"apikeys", "revoke", opID}, env.flags...)...); code != 0 || again != out {
		t.Errorf("revoking ci again, by id: exit %d, %q %q; want %q", code, again, errb, out)
	}
	if code, _, errb := runCLI(t, ctx, append([]string{"apikeys", "revoke", "nope"}, env.flags...)...); code != 1 || !strings.Contains(errb, `"nope"`) {
		t.Errorf("revoking an unknown key: exit %d, %q; want 1 naming it", code, errb)
	}
	// A pasted secret revokes its key and is never printed; a malformed or
	// unknown one is an error that does not repeat it; a name may not
	// start like a secret.
	code, out, errb = runCLI(t, ctx, append([]string{"apikeys", "revoke", readKey}, env.flags...)...)
	if code != 0 || !strings.Contains(out, "dashboard") || strings.Contains(out+errb, readKey[4:]) {
		t.Errorf("revoking by secret: exit %d, %q %q; want dashboard revoked, the secret not printed", code, out, errb)
	}
	for _, ref := range []string{"dfk_" + strings.Repeat("Q", 43), "dfk_" + strings.Repeat("Q", 20)} {
		if code, out, errb := runCLI(t, ctx, append([]string{"apikeys", "revoke", ref}, env.flags...)...); code != 1 || strings.Contains(out+errb, ref[4:]) {
			t.Errorf("revoking %.10s...: exit %d, %q %q; want 1 without the secret", ref, code, out, errb)
		}
	}
	if code, out, errb := runCLI(t, ctx, append([]string{"apikeys", "create", "--scope", "read", "--name", opKey}, env.flags...)...); code != 2 || strings.Contains(out+errb, opKey[4:]) {
		t.Errorf("a name that is a secret: exit %d, %q %q; want a usage error without it", code, out, errb)
	}
	_, list, _ = runCLI(t, ctx, append([]string{"apikeys"}, env.flags...)...)
	var revokedLine string
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, opID) {
			revokedLine = line
		}
	}
	if revokedLine == "" || strings.HasSuffix(strings.TrimSpace(revokedLine), "-") {
		t.Errorf("apikeys list does not show ci revoked: %q", revokedLine)
	}
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, serveErr)
	}
	if logs := serveErr.String(); strings.Contains(logs, readKey) || strings.Contains(logs, opKey) || !strings.Contains(logs, "api: request") {
		t.Errorf("serve's log shows a key, or no request line:\n%s", logs)
	}
}

// storeDefinitions registers the example order workflow, and declares a
// schedule, through a node that runs nothing: their definitions and the
// schedule are stored by Start.
func storeDefinitions(t *testing.T, ctx context.Context, env *serveEnv) {
	t.Helper()
	reg := steps.NewRegistry()
	if err := orderflow.NewServices().Register(reg); err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{Store: env.store, Redis: env.rdb, Prefix: env.prefix, NoWorkers: true, ReconcileInterval: -1, ScheduleInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.LoadWorkflows(workflows.FS, reg); err != nil {
		t.Fatal(err)
	}
	order := orderflow.Order{OrderID: "nightly", Customer: "n@example.com", SKU: "SKU-1", Quantity: 1, Total: 50}
	if err := e.Schedule("nightly", "0 2 * * *", "order", order, engine.TimeZone("Europe/Berlin")); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestWorkflowsAndTrigger: workflows lists and shows the stored
// definitions; trigger starts runs from them on a node without handlers,
// with idempotency keys, and refuses what is wrong with a clear message.
func TestWorkflowsAndTrigger(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	storeDefinitions(t, ctx, env)
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, ctx, append(args, env.flags...)...)
	}

	code, out, errb := cli("workflows")
	if code != 0 || !strings.Contains(out, "order") || !strings.Contains(out, "reserve,notify,points,ship") {
		t.Fatalf("workflows: exit %d, %q %q", code, out, errb)
	}
	var hash string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "order" {
			hash = f[1]
		}
	}
	if len(hash) != 16 {
		t.Errorf("workflows shows no 16-character version for order:\n%s", out)
	}
	code, out, errb = cli("workflows", "show", "order")
	for _, want := range []string{"version " + hash, "input.total >= 100", "mail", "flowchart", "FIRST REGISTERED"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("workflows show order: exit %d, no %q in %q %q", code, want, out, errb)
		}
	}
	if code, _, errb := cli("workflows", "show", "nope"); code != 1 || !strings.Contains(errb, `"nope"`) {
		t.Errorf("workflows show nope: exit %d, %q; want 1 naming it", code, errb)
	}

	input := `{"order_id":"o-1","customer":"c@example.com","sku":"SKU-1","quantity":1,"total":150}`
	code, out, errb = cli("trigger", "order", "--input", input, "--key", "k-1", "--metadata", "source=cli")
	id := strings.TrimSpace(out)
	if code != 0 || id == "" {
		t.Fatalf("trigger: exit %d, %q %q", code, out, errb)
	}
	run, err := env.store.RunGet(ctx, id)
	if err != nil || run.IdempotencyKey != "k-1" || run.Metadata["source"] != "cli" || run.Definition != hash {
		t.Errorf("the triggered run: %+v, %v; want key k-1, metadata source=cli, definition %s", run, err, hash)
	}
	file := filepath.Join(t.TempDir(), "order.json")
	if err := os.WriteFile(file, []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errb := cli("trigger", "order", "--input", "@"+file, "--key", "k-1"); code != 0 || strings.TrimSpace(out) != id {
		t.Errorf("the same key and input again: exit %d, %q %q; want the run %s", code, out, errb, id)
	}
	if code, _, errb := cli("trigger", "order", "--input", `{"order_id":"o-2","total":150}`, "--key", "k-1"); code != 1 || !strings.Contains(errb, id) {
		t.Errorf("the same key with another input: exit %d, %q; want 1 naming the run %s", code, errb, id)
	}
	// The stored definition's schema holds on this node without the
	// handlers: an order whose total is no number starts nothing.
	if code, out, errb := cli("trigger", "order", "--input", `{"order_id":"o-3","total":"lots"}`); code != 1 || out != "" ||
		!strings.Contains(errb, `engine: workflow "order": invalid input: at "/total": got string, want number`) {
		t.Errorf("trigger with a total that is no number: exit %d, %q %q; want 1 saying where and why", code, out, errb)
	}
	if code, _, errb := cli("trigger", "nope", "--input", "{}"); code != 1 || !strings.Contains(errb, `"nope"`) || !strings.Contains(errb, "order") {
		t.Errorf("trigger nope: exit %d, %q; want 1 naming it and the known workflows", code, errb)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--input", `{"order_id":`}, "not valid JSON"},
		{[]string{"--input", `{} []`}, "not valid JSON"},
		{[]string{"--start-at", "tomorrow"}, "--start-at"},
		{[]string{"--metadata", "novalue"}, "--metadata"},
		{[]string{"--metadata", "a=1", "--metadata", "a=2"}, "twice"},
	} {
		code, _, errb := cli(append([]string{"trigger", "order"}, tc.args...)...)
		if code != 2 || !strings.Contains(errb, tc.want) {
			t.Errorf("trigger order %q: exit %d, %q; want 2 and %q", tc.args, code, errb, tc.want)
		}
	}
	if code, _, errb := cli("trigger", "order", "--input", "@"+filepath.Join(t.TempDir(), "missing.json")); code != 1 || !strings.Contains(errb, "missing.json") {
		t.Errorf("trigger --input @missing: exit %d, %q; want 1 naming the file", code, errb)
	}
	start := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	code, out, errb = cli("trigger", "order", "--input", input, "--start-at", start.Format(time.RFC3339))
	if code != 0 {
		t.Fatalf("trigger --start-at: exit %d, %q %q", code, out, errb)
	}
	if run, err := env.store.RunGet(ctx, strings.TrimSpace(out)); err != nil || !run.StartAt.Equal(start) {
		t.Errorf("trigger --start-at %s: the run starts at %v (%v)", start, run.StartAt, err)
	}

	// A worker, which has the handlers, runs the run triggered from the
	// definition alone.
	wctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		code, _, _ := runCLI(t, wctx, append([]string{"worker", "--demo"}, env.flags...)...)
		done <- code
	}()
	testenv.Eventually(t, 30*time.Second, func() bool {
		r, err := env.store.RunGet(ctx, id)
		return err == nil && r.Status == persistence.RunSucceeded
	}, "the run triggered by the CLI did not succeed on a worker")
	stop()
	if code := <-done; code != 0 {
		t.Errorf("the worker exited %d", code)
	}
}

// TestSchedulesCommands: schedules lists the stored schedules with their
// next fire time, and pauses, resumes and triggers one.
func TestSchedulesCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	storeDefinitions(t, ctx, env)
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, ctx, append(args, env.flags...)...)
	}
	state := func() string {
		t.Helper()
		code, out, errb := cli("schedules", "list")
		if code != 0 {
			t.Fatalf("schedules list: exit %d, %q %q", code, out, errb)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "nightly ") {
				return line
			}
		}
		t.Fatalf("schedules list does not show nightly:\n%s", out)
		return ""
	}
	line := state()
	for _, want := range []string{"order", "0 2 * * *", "Europe/Berlin", "active"} {
		if !strings.Contains(line, want) {
			t.Errorf("schedules: no %q in %q", want, line)
		}
	}
	if !regexp.MustCompile(`active +\d{4}-\d\d-\d\dT0[01]:00:00Z`).MatchString(line) {
		t.Errorf("schedules: no next fire time at 2:00 in Berlin (01:00 or 00:00 UTC) in %q", line)
	}
	if code, out, errb := cli("schedules", "pause", "nightly"); code != 0 || !strings.Contains(out, "paused") {
		t.Fatalf("schedules pause: exit %d, %q %q", code, out, errb)
	}
	if line := state(); !strings.Contains(line, "paused") {
		t.Errorf("after pause: %q", line)
	}
	if code, out, errb := cli("schedules", "resume", "nightly"); code != 0 || !strings.Contains(out, "next fire time") {
		t.Fatalf("schedules resume: exit %d, %q %q", code, out, errb)
	}
	if line := state(); !strings.Contains(line, "active") {
		t.Errorf("after resume: %q", line)
	}
	code, out, errb := cli("schedules", "trigger", "nightly")
	if code != 0 {
		t.Fatalf("schedules trigger: exit %d, %q %q", code, out, errb)
	}
	run, err := env.store.RunGet(ctx, strings.TrimSpace(out))
	if err != nil || run.Workflow != "order" || run.Schedule != "nightly" {
		t.Errorf("the run schedules trigger started: %+v, %v", run, err)
	}
	for _, sub := range []string{"pause", "resume", "trigger"} {
		if code, _, errb := cli("schedules", sub, "nope"); code != 1 || !strings.Contains(errb, `"nope"`) {
			t.Errorf("schedules %s nope: exit %d, %q; want 1 naming it", sub, code, errb)
		}
	}
	if code, _, errb := runCLI(t, ctx, "schedules", "pause"); code != 2 || !strings.Contains(errb, "NAME") {
		t.Errorf("schedules pause without a name: exit %d, %q", code, errb)
	}

	// create, edit and delete at run time; bad values store nothing.
	if code, out, errb := cli("schedules", "create", "tenant-1", "--spec", "*/5 * * * *", "--workflow", "order", "--input", `{"t":1,"total":150}`); code != 0 || !strings.Contains(out, "created") {
		t.Fatalf("schedules create: exit %d, %q %q", code, out, errb)
	}
	if code, _, errb := cli("schedules", "create", "tenant-2", "--spec", "*/5 * * * *", "--workflow", "order", "--time-zone", "Mars/Olympus"); code != 1 || !strings.Contains(errb, "Mars/Olympus") {
		t.Errorf("schedules create with a bad zone: exit %d, %q; want 1 naming it", code, errb)
	}
	if code, _, errb := cli("schedules", "create", "tenant-2", "--spec", "@daily", "--workflow", "nope"); code != 1 || !strings.Contains(errb, `"nope"`) {
		t.Errorf("schedules create of an unknown workflow: exit %d, %q; want 1 naming it", code, errb)
	}
	if _, err := env.store.ScheduleGet(ctx, "tenant-2"); !errors.Is(err, persistence.ErrScheduleNotFound) {
		t.Errorf("a refused schedule was stored: %v", err)
	}
	if code, out, errb := cli("schedules", "edit", "tenant-1", "--spec", "@hourly"); code != 0 || !strings.Contains(out, "edited") {
		t.Fatalf("schedules edit: exit %d, %q %q", code, out, errb)
	}
	if sc, err := env.store.ScheduleGet(ctx, "tenant-1"); err != nil || sc.Spec != "@hourly" || string(sc.Input) != `{"t":1,"total":150}` || sc.Owner != persistence.OwnerOperator {
		t.Errorf("after edit: %+v, %v", sc, err)
	}
	if code, out, errb := cli("schedules", "delete", "tenant-1"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("schedules delete: exit %d, %q %q", code, out, errb)
	}
	if code, _, errb := cli("schedules", "delete", "tenant-1"); code != 1 || !strings.Contains(errb, `"tenant-1"`) {
		t.Errorf("second delete: exit %d, %q; want 1 naming it", code, errb)
	}
}

// TestServeWithReadReplica: serve --mysql-read-dsn reads the API's
// listings from it once the node's heartbeat has reached it (the header
// says so). The same database stands in for a replica that keeps up;
// lag, fallback and a lost replica are tested in package api.
func TestServeWithReadReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := newServeEnv(t, ctx)
	u, errb, stop := env.startServe(t, ctx, "--listen", "127.0.0.1:0", "--mysql-read-dsn", env.dsn, "--node-heartbeat", "200ms", "--node-timeout", "1s")
	testenv.Eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get(u + "/v1/runs")
		if err != nil {
			t.Fatalf("GET /v1/runs: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK && resp.Header.Get(api.ReplicaLagHeader) == "0.000"
	}, "GET /v1/runs was not read from the read replica (no %s: 0.000)", api.ReplicaLagHeader)
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d:\n%s", code, errb)
	}
}
