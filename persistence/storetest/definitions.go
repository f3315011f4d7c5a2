package storetest

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/persistence"
)

// Workflow definitions, API keys, the definition a run started with, and
// runs listed by idempotency key.

// def is a definition of workflow wf at version v, registered at t.
func def(wf, v string, declared int, t time.Time) persistence.Definition {
	return persistence.Definition{Workflow: wf, Version: v, Declared: declared,
		Spec: []byte(fmt.Sprintf(`{"name":%q,"declared_version":%d,"steps":[{"name":"a"}],"v":%q}`, wf, declared, v)), RegisteredAt: t}
}

func upsert(t *testing.T, st persistence.Store, d persistence.Definition) persistence.Definition {
	t.Helper()
	got, err := st.DefinitionUpsert(ctx(t), d)
	if err != nil {
		t.Fatalf("DefinitionUpsert(%s %s): %v", d.Workflow, d.Version, err)
	}
	return got
}

// versions returns "workflow@version" of each definition.
func versions(ds []persistence.Definition) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, d.Workflow+"@"+d.Version)
	}
	return out
}

func listDefinitions(t *testing.T, st persistence.Store, workflow string) []persistence.Definition {
	t.Helper()
	ds, err := st.DefinitionList(ctx(t), persistence.DefinitionListParams{Workflow: workflow})
	if err != nil {
		t.Fatalf("DefinitionList(%q): %v", workflow, err)
	}
	if ds == nil {
		t.Errorf("DefinitionList(%q) = nil, want an empty slice", workflow)
	}
	return ds
}

// testDefinitions: a version is inserted once and keeps its spec and
// first registration; a repeat moves only its latest registration. Get
// returns one version; a workflow's list is its versions, latest
// registration first; the list of every workflow is each one's current
// version (latest registration, ties by the greater version), by name.
// Bad definitions are refused with the field and value named.
func (s *suite) testDefinitions(t *testing.T, st persistence.Store) {
	c := ctx(t)
	if got := listDefinitions(t, st, ""); len(got) != 0 {
		t.Errorf("DefinitionList of an empty store = %v, want none", versions(got))
	}
	v1 := def("order", "a1b2c3d4e5f60718", 1, t0)
	got := upsert(t, st, v1)
	want := v1
	want.CreatedAt = t0
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DefinitionUpsert of a new version (-want +got):\n%s", diff)
	}
	// Registered again, later, with another spec and declared number: only
	// the registration moves (a version is its hash).
	again := v1
	again.Spec, again.Declared, again.RegisteredAt = []byte(`{"other":true}`), 9, at(time.Hour)
	got = upsert(t, st, again)
	want.RegisteredAt = at(time.Hour)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("DefinitionUpsert of a known version (-want +got):\n%s", diff)
	}
	if g, err := st.DefinitionGet(c, "order", v1.Version); err != nil {
		t.Errorf("DefinitionGet: %v", err)
	} else if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("DefinitionGet (-want +got):\n%s", diff)
	}

	// A second version, registered after; another workflow.
	v2 := upsert(t, st, def("order", "ffff000011112222", 2, at(2*time.Hour)))
	upsert(t, st, def("billing", "0000000000000001", 1, at(time.Minute)))
	if diff := cmp.Diff([]string{"order@ffff000011112222", "order@a1b2c3d4e5f60718"}, versions(listDefinitions(t, st, "order"))); diff != "" {
		t.Errorf("versions of order (-want +got):\n%s", diff)
	}
	all := listDefinitions(t, st, "")
	if diff := cmp.Diff([]string{"billing@0000000000000001", "order@ffff000011112222"}, versions(all)); diff != "" {
		t.Errorf("current versions (-want +got):\n%s", diff)
	}
	if len(all) == 2 {
		if diff := cmp.Diff(v2, all[1]); diff != "" {
			t.Errorf("current version of order, as listed (-want +got):\n%s", diff)
		}
	}
	// The older version registered again (a node of the previous release
	// restarted): it is current again; and with a registration time
	// earlier than the other's (a clock behind), the other is current.
	upsert(t, st, def("order", v1.Version, 1, at(3*time.Hour)))
	if diff := cmp.Diff([]string{"billing@0000000000000001", "order@a1b2c3d4e5f60718"}, versions(listDefinitions(t, st, ""))); diff != "" {
		t.Errorf("current versions after the old one registered again (-want +got):\n%s", diff)
	}
	upsert(t, st, def("order", v1.Version, 1, at(time.Hour)))
	if diff := cmp.Diff([]string{"billing@0000000000000001", "order@ffff000011112222"}, versions(listDefinitions(t, st, ""))); diff != "" {
		t.Errorf("current versions after the old one registered with an earlier time (-want +got):\n%s", diff)
	}
	// Two versions registered at the same instant: the greater version is
	// current, and is listed first.
	upsert(t, st, def("tie", "aaaa", 1, t0))
	upsert(t, st, def("tie", "cccc", 1, t0))
	upsert(t, st, def("tie", "bbbb", 1, t0))
	if diff := cmp.Diff([]string{"tie@cccc", "tie@bbbb", "tie@aaaa"}, versions(listDefinitions(t, st, "tie"))); diff != "" {
		t.Errorf("versions registered at one instant (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"billing@0000000000000001", "order@ffff000011112222", "tie@cccc"}, versions(listDefinitions(t, st, ""))); diff != "" {
		t.Errorf("current versions with a tie (-want +got):\n%s", diff)
	}

	// The current version alone, as DefinitionList lists it.
	for wf, want := range map[string]string{"tie": "cccc", "order": "ffff000011112222", "billing": "0000000000000001"} {
		cur, err := st.DefinitionCurrent(c, wf)
		if err != nil || cur.Version != want || cur.Workflow != wf || len(cur.Spec) == 0 {
			t.Errorf("DefinitionCurrent(%s) = %s@%s (%d spec bytes), %v; want version %s", wf, cur.Workflow, cur.Version, len(cur.Spec), err, want)
		}
	}
	if _, err := st.DefinitionCurrent(c, "nobody"); !errors.Is(err, persistence.ErrDefinitionNotFound) {
		t.Errorf("DefinitionCurrent(nobody) = %v, want ErrDefinitionNotFound", err)
	}
	if _, err := st.DefinitionCurrent(c, "a'b"); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("DefinitionCurrent(a'b) = %v, want ErrInvalid", err)
	}

	// Unknown versions and workflows.
	for _, k := range [][2]string{{"order", "0123"}, {"nobody", v1.Version}, {"order", "A1B2"}, {"", ""}, {"bad name", "x"}, {"order", hostile["injection"]}} {
		if _, err := st.DefinitionGet(c, k[0], k[1]); !errors.Is(err, persistence.ErrDefinitionNotFound) {
			t.Errorf("DefinitionGet(%q, %q) = %v, want ErrDefinitionNotFound", k[0], k[1], err)
		}
	}
	if got := listDefinitions(t, st, "nobody"); len(got) != 0 {
		t.Errorf("DefinitionList(nobody) = %v, want none", versions(got))
	}
	if _, err := st.DefinitionList(c, persistence.DefinitionListParams{Workflow: "a'b"}); !errors.Is(err, persistence.ErrInvalid) {
		t.Errorf("DefinitionList(a'b) = %v, want ErrInvalid", err)
	}

	// Refusals: a *ValidationError naming the field and the value, and
	// nothing stored.
	big := append(append([]byte(`"`), bytes.Repeat([]byte("x"), persistence.MaxDefinitionSpec)...), '"')
	for _, bad := range []struct {
		name  string
		edit  func(d *persistence.Definition)
		field string
		value string
	}{
		{"bad workflow name", func(d *persistence.Definition) { d.Workflow = "bad name" }, "workflow name", "bad name"},
		{"empty workflow name", func(d *persistence.Definition) { d.Workflow = "" }, "workflow name", ""},
		{"empty version", func(d *persistence.Definition) { d.Version = "" }, "definition version", ""},
		{"uppercase version", func(d *persistence.Definition) { d.Version = "A1B2" }, "definition version", "A1B2"},
		{"version with a slash", func(d *persistence.Definition) { d.Version = "a/b" }, "definition version", "a/b"},
		{"long version", func(d *persistence.Definition) { d.Version = strings.Repeat("a", 65) }, "definition version", strings.Repeat("a", 65)},
		{"declared 0", func(d *persistence.Definition) { d.Declared = 0 }, `workflow "neww" declared version`, "0"},
		{"empty spec", func(d *persistence.Definition) { d.Spec = nil }, `workflow "neww" definition abcd spec`, ""},
		{"spec not JSON", func(d *persistence.Definition) { d.Spec = []byte(`{"steps":`) }, `workflow "neww" definition abcd spec`, `{"steps":`},
		{"spec over 1 MiB", func(d *persistence.Definition) { d.Spec = big }, `workflow "neww" definition abcd spec`, string(big[:80]) + "..."},
		{"no registration time", func(d *persistence.Definition) { d.RegisteredAt = time.Time{} }, `workflow "neww" definition abcd registration time`, ""},
	} {
		d := def("neww", "abcd", 1, t0)
		bad.edit(&d)
		_, err := st.DefinitionUpsert(c, d)
		var ve *persistence.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("%s: DefinitionUpsert = %v, want a *ValidationError", bad.name, err)
			continue
		}
		if ve.Field != bad.field || ve.Value != bad.value {
			t.Errorf("%s: error names %s %.90q, want %s %.90q", bad.name, ve.Field, ve.Value, bad.field, bad.value)
		}
	}
	if got := listDefinitions(t, st, "neww"); len(got) != 0 {
		t.Errorf("refused definitions stored: %v", versions(got))
	}
	// The largest spec, and the longest version, are kept.
	d := def("neww", strings.Repeat("z", 64), 1, t0)
	d.Spec = append(append([]byte(`"`), bytes.Repeat([]byte("y"), persistence.MaxDefinitionSpec-2)...), '"')
	if got := upsert(t, st, d); !bytes.Equal(got.Spec, d.Spec) || got.Version != d.Version {
		t.Errorf("the largest spec (%d bytes) did not round-trip: %d bytes, version %q", len(d.Spec), len(got.Spec), got.Version)
	}
}

// testConcurrentDefinitions: nodes registering versions of one workflow
// at once (a rolling deploy, first registrations included) leave every
// version stored once and the latest registered current.
func (s *suite) testConcurrentDefinitions(t *testing.T, st persistence.Store) {
	c := ctx(t)
	const n = 24
	for round := range 3 {
		wf := fmt.Sprintf("deploy%d", round)
		errs := make(chan error, n)
		parallel(n, func(i int) {
			// Four versions, each registered by six nodes; version 3 last.
			v := fmt.Sprintf("v%d", i%4)
			if _, err := st.DefinitionUpsert(c, def(wf, v, 1, at(time.Duration(i%4)*time.Second))); err != nil {
				errs <- fmt.Errorf("node %d, version %s: %w", i, v, err)
			}
		})
		close(errs)
		for err := range errs {
			t.Errorf("round %d: %v", round, err)
		}
		if diff := cmp.Diff([]string{wf + "@v3", wf + "@v2", wf + "@v1", wf + "@v0"}, versions(listDefinitions(t, st, wf))); diff != "" {
			t.Errorf("round %d: versions (-want +got):\n%s", round, diff)
		}
		var current []string
		for _, d := range listDefinitions(t, st, "") {
			if d.Workflow == wf {
				current = append(current, d.Version)
			}
		}
		if diff := cmp.Diff([]string{"v3"}, current); diff != "" {
			t.Errorf("round %d: current versions of %s (-want +got):\n%s", round, wf, diff)
		}
	}
}

// key returns an API key named name whose secret is secret.
func key(t *testing.T, name, scope, secret string, created time.Time) persistence.APIKey {
	sum := sha256.Sum256([]byte(secret))
	return persistence.APIKey{ID: newID(t), Name: name, Scope: scope, Hash: sum[:], Hint: secret[:min(12, len(secret))], CreatedAt: created}
}

func keyNames(ks []persistence.APIKey) []string {
	out := []string{}
	for _, k := range ks {
		s := k.Name
		if k.RevokedAt != nil {
			s += " (revoked)"
		}
		out = append(out, s)
	}
	return out
}

// testAPIKeys: keys are found by hash (revoked ones too), listed oldest
// first, and revoked by id or by name; a name is unique among the keys
// not revoked; bad keys are refused with the field and value named.
func (s *suite) testAPIKeys(t *testing.T, st persistence.Store) {
	c := ctx(t)
	create := func(k persistence.APIKey) persistence.APIKey {
		t.Helper()
		got, err := st.APIKeyCreate(c, k)
		if err != nil {
			t.Fatalf("APIKeyCreate(%s): %v", k.Name, err)
		}
		return got
	}
	list := func() []persistence.APIKey {
		t.Helper()
		ks, err := st.APIKeyList(c)
		if err != nil {
			t.Fatalf("APIKeyList: %v", err)
		}
		if ks == nil {
			t.Error("APIKeyList = nil, want a slice")
		}
		return ks
	}
	if got := list(); len(got) != 0 {
		t.Errorf("APIKeyList of an empty store = %v", keyNames(got))
	}
	ci := key(t, "ci", persistence.ScopeOperate, "dfk_secret-number-one", at(time.Second))
	if got := create(ci); !cmp.Equal(ci, got) {
		t.Errorf("APIKeyCreate returned %+v, want %+v", got, ci)
	}
	admin := create(key(t, "ops.admin_1", persistence.ScopeAdmin, "dfk_secret-number-two", t0))
	reader := create(key(t, "R", persistence.ScopeRead, "short", at(2*time.Second)))
	if diff := cmp.Diff([]persistence.APIKey{admin, ci, reader}, list()); diff != "" {
		t.Errorf("APIKeyList (-want +got):\n%s", diff)
	}
	if got, err := st.APIKeyByHash(c, ci.Hash); err != nil || !cmp.Equal(ci, got) {
		t.Errorf("APIKeyByHash = %+v, %v; want %+v", got, err, ci)
	}
	other := sha256.Sum256([]byte("nobody's"))
	for _, h := range [][]byte{other[:], nil, ci.Hash[:31], append(append([]byte(nil), ci.Hash...), 0)} {
		if _, err := st.APIKeyByHash(c, h); !errors.Is(err, persistence.ErrAPIKeyNotFound) {
			t.Errorf("APIKeyByHash(%x) = %v, want ErrAPIKeyNotFound", h, err)
		}
	}

	// A name in use by a valid key is refused, and nothing is stored; so
	// are a hash or an id already stored.
	dup := key(t, "ci", persistence.ScopeRead, "another secret", at(3*time.Second))
	if _, err := st.APIKeyCreate(c, dup); !errors.Is(err, persistence.ErrAPIKeyExists) || !strings.Contains(err.Error(), `"ci"`) {
		t.Errorf("APIKeyCreate of a name in use = %v, want ErrAPIKeyExists naming it", err)
	}
	sameHash := key(t, "ci2", persistence.ScopeRead, "dfk_secret-number-one", at(3*time.Second))
	if _, err := st.APIKeyCreate(c, sameHash); !errors.Is(err, persistence.ErrInvalid) || !strings.Contains(err.Error(), "hash") {
		t.Errorf("APIKeyCreate with a hash in use = %v, want ErrInvalid naming the hash", err)
	}
	sameID := key(t, "ci3", persistence.ScopeRead, "a third secret", at(3*time.Second))
	sameID.ID = ci.ID
	if _, err := st.APIKeyCreate(c, sameID); !errors.Is(err, persistence.ErrInvalid) || !strings.Contains(err.Error(), "id") {
		t.Errorf("APIKeyCreate with an id in use = %v, want ErrInvalid naming the id", err)
	}
	if got := list(); len(got) != 3 {
		t.Errorf("refused keys stored: %v", keyNames(got))
	}

	// Revoked by name: the name is free again, the revoked key is still
	// found by its hash (the caller refuses it), and revoking it again
	// returns it as it is.
	revoked, err := st.APIKeyRevoke(c, persistence.APIKeyRevokeParams{Name: "ci", Now: at(time.Minute)})
	if err != nil {
		t.Fatalf("APIKeyRevoke(ci): %v", err)
	}
	wantRevoked := ci
	wantRevoked.RevokedAt = ptr(at(time.Minute))
	if diff := cmp.Diff(wantRevoked, revoked); diff != "" {
		t.Errorf("APIKeyRevoke(ci) (-want +got):\n%s", diff)
	}
	if got, err := st.APIKeyByHash(c, ci.Hash); err != nil || !cmp.Equal(wantRevoked, got) {
		t.Errorf("APIKeyByHash of a revoked key = %+v, %v; want it, revoked", got, err)
	}
	ci2 := create(dup)
	for _, p := range []persistence.APIKeyRevokeParams{{ID: ci.ID, Now: at(2 * time.Minute)}} {
		if got, err := st.APIKeyRevoke(c, p); err != nil || !cmp.Equal(wantRevoked, got) {
			t.Errorf("APIKeyRevoke(%+v) of a revoked key = %+v, %v; want it as it was", p, got, err)
		}
	}
	// By id; then the name has no valid key, and revoking it by name
	// returns the one revoked last.
	if got, err := st.APIKeyRevoke(c, persistence.APIKeyRevokeParams{ID: ci2.ID, Now: at(3 * time.Minute)}); err != nil ||
		got.ID != ci2.ID || got.RevokedAt == nil || !got.RevokedAt.Equal(at(3*time.Minute)) {
		t.Errorf("APIKeyRevoke(id of the second ci) = %+v, %v", got, err)
	}
	if got, err := st.APIKeyRevoke(c, persistence.APIKeyRevokeParams{Name: "ci", Now: at(4 * time.Minute)}); err != nil ||
		got.ID != ci2.ID || !got.RevokedAt.Equal(at(3*time.Minute)) {
		t.Errorf("APIKeyRevoke(ci) with every ci key revoked = %+v, %v; want the one revoked last, as it was", got, err)
	}
	if diff := cmp.Diff([]string{"ops.admin_1", "ci (revoked)", "R", "ci (revoked)"}, keyNames(list())); diff != "" {
		t.Errorf("APIKeyList after the revocations (-want +got):\n%s", diff)
	}
	for _, p := range []persistence.APIKeyRevokeParams{{ID: newID(t)}, {Name: "nobody"}, {ID: "bad id!"}, {Name: "bad name"}} {
		if _, err := st.APIKeyRevoke(c, p); !errors.Is(err, persistence.ErrAPIKeyNotFound) {
			t.Errorf("APIKeyRevoke(%+v) = %v, want ErrAPIKeyNotFound", p, err)
		}
	}
	for _, p := range []persistence.APIKeyRevokeParams{{}, {ID: admin.ID, Name: admin.Name}} {
		if _, err := st.APIKeyRevoke(c, p); !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("APIKeyRevoke(%+v) = %v, want ErrInvalid", p, err)
		}
	}
	if got, err := st.APIKeyByHash(c, admin.Hash); err != nil || got.RevokedAt != nil {
		t.Errorf("admin key after refused revocations = %+v, %v; want it valid", got, err)
	}

	// Refusals: a *ValidationError naming the field and the value.
	for _, bad := range []struct {
		name  string
		edit  func(k *persistence.APIKey)
		field string
		value string
	}{
		{"empty id", func(k *persistence.APIKey) { k.ID = "" }, "api key id", ""},
		{"bad id", func(k *persistence.APIKey) { k.ID = "a b" }, "api key id", "a b"},
		{"empty name", func(k *persistence.APIKey) { k.Name = "" }, "api key name", ""},
		{"long name", func(k *persistence.APIKey) { k.Name = strings.Repeat("n", 101) }, "api key name", strings.Repeat("n", 80) + "..."},
		{"name with a space", func(k *persistence.APIKey) { k.Name = "my key" }, "api key name", "my key"},
		{"hostile name", func(k *persistence.APIKey) { k.Name = hostile["injection"] }, "api key name", hostile["injection"]},
		{"unknown scope", func(k *persistence.APIKey) { k.Scope = "root" }, `api key "new" scope`, "root"},
		{"empty scope", func(k *persistence.APIKey) { k.Scope = "" }, `api key "new" scope`, ""},
		{"short hash", func(k *persistence.APIKey) { k.Hash = []byte{1, 2, 3} }, `api key "new" hash`, "010203"},
		{"no hash", func(k *persistence.APIKey) { k.Hash = nil }, `api key "new" hash`, ""},
		{"long hint", func(k *persistence.APIKey) { k.Hint = strings.Repeat("h", 17) }, `api key "new" hint`, strings.Repeat("h", 17)},
		{"hint with NUL", func(k *persistence.APIKey) { k.Hint = "a\x00" }, `api key "new" hint`, "a\x00"},
		{"no creation time", func(k *persistence.APIKey) { k.CreatedAt = time.Time{} }, `api key "new" creation time`, ""},
		{"revoked already", func(k *persistence.APIKey) { k.RevokedAt = ptr(t0) }, `api key "new" revocation time`, t0.String()},
	} {
		k := key(t, "new", persistence.ScopeRead, "the new secret", t0)
		bad.edit(&k)
		_, err := st.APIKeyCreate(c, k)
		var ve *persistence.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, persistence.ErrInvalid) {
			t.Errorf("%s: APIKeyCreate = %v, want a *ValidationError", bad.name, err)
			continue
		}
		if ve.Field != bad.field || ve.Value != bad.value {
			t.Errorf("%s: error names %s %q, want %s %q", bad.name, ve.Field, ve.Value, bad.field, bad.value)
		}
	}
	if got := list(); len(got) != 4 {
		t.Errorf("refused keys stored: %v", keyNames(got))
	}
	// The longest name and hint are kept.
	long := key(t, strings.Repeat("L", 100), persistence.ScopeRead, "0123456789abcdefXYZ", t0)
	long.Hint = "0123456789abcdef"
	if got := create(long); got.Name != long.Name || got.Hint != long.Hint {
		t.Errorf("longest name and hint = %q %q", got.Name, got.Hint)
	}

	// Concurrent creations of one name: exactly one wins.
	var wins atomic.Int32
	parallel(20, func(i int) {
		_, err := st.APIKeyCreate(c, key(t, "race", persistence.ScopeRead, fmt.Sprintf("secret %d", i), t0))
		switch {
		case err == nil:
			wins.Add(1)
		case !errors.Is(err, persistence.ErrAPIKeyExists):
			t.Errorf("concurrent APIKeyCreate: %v, want success or ErrAPIKeyExists", err)
		}
	})
	if wins.Load() != 1 {
		t.Errorf("%d concurrent creations of one name won, want 1", wins.Load())
	}
}

// testRunDefinition: the definition version a run starts with is stored
// with it and comes back from every call that returns runs; a run created
// without one has none; a bad version is refused.
func (s *suite) testRunDefinition(t *testing.T, st persistence.Store) {
	c := ctx(t)
	const v = "a1b2c3d4e5f60718"
	check := func(what string, r persistence.Run, want string) {
		t.Helper()
		if r.Definition != want {
			t.Errorf("%s: run %s has definition %q, want %q", what, r.ID, r.Definition, want)
		}
	}
	p := persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Definition: v, IdempotencyKey: "k", Now: t0, Steps: specs("a", "b:a")}
	res, err := st.RunCreate(c, p)
	if err != nil {
		t.Fatal(err)
	}
	id := res.Run.ID
	check("RunCreate", res.Run, v)
	check("RunGet", getRun(t, st, id), v)
	// A repeat of the key, with another definition (a node of the next
	// release): the existing run, with its own.
	p2 := p
	p2.ID, p2.Definition = newID(t), "ffff"
	if again, err := st.RunCreate(c, p2); err != nil || again.Created {
		t.Fatalf("repeat: %+v, %v", again, err)
	} else {
		check("RunCreate repeat", again.Run, v)
	}
	page, err := st.RunList(c, persistence.RunListParams{Workflow: "wf"})
	if err != nil || len(page.Runs) != 1 {
		t.Fatalf("RunList = %d runs, %v", len(page.Runs), err)
	}
	check("RunList", page.Runs[0], v)
	cl := claim(t, st, id, "a", "f", t0)
	check("StepClaim", cl.Run, v)
	outs, err := st.StepCompleteMany(c, persistence.StepCompleteManyParams{
		Items:         []persistence.StepCompleteParams{{RunID: id, Step: "a", Fence: "f", Now: at(time.Second)}},
		ClaimReleased: &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 1, Fence: "g", Worker: "w", LeaseUntil: at(time.Minute)},
	})
	if err != nil || outs[0].Err != nil || len(outs[0].Result.Claimed) != 1 {
		t.Fatalf("StepCompleteMany releasing b: %v %+v", err, outs)
	}
	check("StepCompleteMany claimed", outs[0].Result.Claimed[0].Run, v)
	tr, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: id, To: persistence.RunCancelled, Now: at(2 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	check("RunTransition", tr.Run, v)

	// Batches: RunCreateMany, with roots claimed at create, then claimed
	// by StepClaimMany.
	ids := []string{newID(t), newID(t), newID(t)}
	created, err := st.RunCreateMany(c, persistence.RunCreateManyParams{
		Items: []persistence.RunCreateParams{
			{ID: ids[0], Workflow: "wf", Definition: "v-1", Now: t0, Steps: specs("a")},
			{ID: ids[1], Workflow: "wf", Now: t0, Steps: specs("a")},
			{ID: ids[2], Workflow: "wf", Definition: "v:2", Now: t0, StartAt: at(time.Minute), Steps: specs("a")},
		},
		ClaimRoots: &persistence.ReleaseClaim{Queues: []string{"q1"}, Max: 1, Fence: "c", Worker: "w", LeaseUntil: at(time.Minute)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"v-1", "", "v:2"} {
		if created[i].Err != nil {
			t.Fatalf("RunCreateMany item %d: %v", i, created[i].Err)
		}
		check("RunCreateMany", created[i].Result.Run, want)
		check("RunGet after RunCreateMany", getRun(t, st, ids[i]), want)
		for _, cl := range created[i].Claimed {
			check("RunCreateMany claimed root", cl.Run, want)
		}
	}
	if len(created[0].Claimed) != 1 {
		t.Errorf("RunCreateMany claimed %d roots of the first run, want 1", len(created[0].Claimed))
	}
	due, err := st.RunListDue(c, persistence.ListDueParams{Before: at(time.Hour)})
	if err != nil || len(due) != 1 {
		t.Fatalf("RunListDue = %d runs, %v", len(due), err)
	}
	check("RunListDue", due[0], "v:2")
	many, err := st.StepClaimMany(c, persistence.StepClaimManyParams{
		Items: []persistence.StepClaimItem{{RunID: ids[1], Step: "a"}, {RunID: ids[2], Step: "a"}},
		Fence: "m", Worker: "w", LeaseUntil: at(2 * time.Minute), Now: at(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"", "v:2"} {
		if many[i].Err != nil {
			t.Errorf("StepClaimMany item %d: %v", i, many[i].Err)
			continue
		}
		check("StepClaimMany", many[i].Result.Run, want)
	}

	// In the caller's transaction.
	if txs, ok := st.(persistence.TxStore); ok && s.opts.beginTx != nil {
		tx, err := s.opts.beginTx(c, st)
		if err != nil {
			t.Fatal(err)
		}
		txID := newID(t)
		res, err := txs.RunCreateTx(c, tx, persistence.RunCreateParams{ID: txID, Workflow: "wf", Definition: "tx_1", Now: t0, Steps: specs("a")})
		if err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		check("RunCreateTx", res.Run, "tx_1")
		check("RunGet after RunCreateTx", getRun(t, st, txID), "tx_1")
	}

	// A version the store cannot hold is refused, naming it.
	for _, bad := range []string{"A1B2", "a b", strings.Repeat("a", 65), hostile["injection"], "é"} {
		_, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "wf", Definition: bad, Now: t0, Steps: specs("a")})
		var ve *persistence.ValidationError
		if !errors.As(err, &ve) || ve.Field != "definition version" || ve.Value != bad {
			t.Errorf("RunCreate with definition %q = %v, want a *ValidationError naming it", bad, err)
		}
	}
}

// testRunListByKey: RunList's IdempotencyKey filter matches the key
// exactly (no pattern), across workflows, and combines with the other
// filters and the cursor; a key the store could not hold is refused.
func (s *suite) testRunListByKey(t *testing.T, st persistence.Store) {
	c := ctx(t)
	mk := func(wf, key, schedule string, created time.Time) string {
		t.Helper()
		res, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: wf, IdempotencyKey: key, Schedule: schedule, Now: created, Steps: specs("a")})
		if err != nil {
			t.Fatal(err)
		}
		return res.Run.ID
	}
	a := mk("alpha", "order-42", "", t0)
	b := mk("beta", "order-42", "nightly", at(time.Second))
	g := mk("gamma", "order-42", "", at(time.Second))
	mk("alpha", "order-4", "", t0)
	mk("alpha", "order-42x", "", t0)
	mk("alpha", "ORDER-42", "", t0)
	mk("beta", "order_42", "", t0)
	pct := mk("beta", "order%", "", t0)
	mk("beta", "", "", t0)
	if _, err := st.RunTransition(c, persistence.RunTransitionParams{RunID: g, To: persistence.RunFailed, Now: at(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// b and g share a creation time: the id breaks the tie.
	newest := []string{b, g}
	if g > b {
		newest = []string{g, b}
	}
	for _, tc := range []struct {
		p    persistence.RunListParams
		want []string
	}{
		{persistence.RunListParams{IdempotencyKey: "order-42"}, append(newest, a)},
		{persistence.RunListParams{IdempotencyKey: "order%"}, []string{pct}},
		{persistence.RunListParams{IdempotencyKey: "order"}, nil},
		{persistence.RunListParams{IdempotencyKey: "order-42", Workflow: "alpha"}, []string{a}},
		{persistence.RunListParams{IdempotencyKey: "order-42", Schedule: "nightly"}, []string{b}},
		{persistence.RunListParams{IdempotencyKey: "order-42", Status: []persistence.RunStatus{persistence.RunFailed}}, []string{g}},
		{persistence.RunListParams{IdempotencyKey: "order-42", Status: []persistence.RunStatus{persistence.RunRunning, persistence.RunFailed, persistence.RunRunning}}, append(newest, a)},
		{persistence.RunListParams{IdempotencyKey: "order-42", Workflow: "beta", Status: []persistence.RunStatus{persistence.RunFailed}}, nil},
		{persistence.RunListParams{IdempotencyKey: "order-42", CreatedAfter: at(time.Second)}, newest},
		{persistence.RunListParams{IdempotencyKey: "order-42", CreatedBefore: at(time.Second)}, []string{a}},
	} {
		for _, limit := range []int{1, 2, 0} {
			p := tc.p
			p.Limit = limit
			if diff := cmp.Diff(tc.want, pageAll(t, st, p)); diff != "" {
				t.Errorf("RunList(%+v) paged (-want +got):\n%s", p, diff)
			}
		}
	}
	for label, v := range hostile {
		if v == "" {
			continue
		}
		page, err := st.RunList(c, persistence.RunListParams{IdempotencyKey: v})
		if strings.Contains(v, "\x00") || len(v) > 255 {
			if !errors.Is(err, persistence.ErrInvalid) {
				t.Errorf("%s: RunList by a key the store cannot hold = %v, want ErrInvalid", label, err)
			}
			continue
		}
		if err != nil || len(page.Runs) != 0 {
			t.Errorf("%s: RunList by a hostile key = %d runs, %v; want none", label, len(page.Runs), err)
		}
	}
	for _, bad := range []string{"a\x00b", strings.Repeat("k", 256), "\xff"} {
		_, err := st.RunList(c, persistence.RunListParams{IdempotencyKey: bad})
		var ve *persistence.ValidationError
		if !errors.As(err, &ve) || ve.Field != "idempotency key" {
			t.Errorf("RunList by key %q = %v, want a *ValidationError naming the idempotency key", bad[:min(len(bad), 20)], err)
		}
	}
}

// RunUpgradeDefinitions checks the migration that adds definitions, API
// keys, the definition of a run and listing runs by idempotency key.
// open returns a store whose database is migrated up to the version
// before that migration, and a function that applies the rest. Runs
// written before have no definition and are listed by their keys after
// it; definitions and keys can be stored.
func RunUpgradeDefinitions(t *testing.T, open func(t *testing.T) (persistence.Store, func() error)) {
	st, migrate := open(t)
	c := ctx(t)
	var before []string
	for _, wf := range []string{"a", "b"} {
		res, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: wf, IdempotencyKey: "order-1", Now: t0, Steps: specs("x")})
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, res.Run.ID)
	}
	if err := migrate(); err != nil {
		t.Fatalf("migrating: %v", err)
	}
	page, err := st.RunList(c, persistence.RunListParams{IdempotencyKey: "order-1"})
	if err != nil {
		t.Fatalf("RunList by key after the upgrade: %v", err)
	}
	var got []string
	for _, r := range page.Runs {
		got = append(got, r.ID)
		if r.Definition != "" {
			t.Errorf("run %s from before the upgrade has definition %q, want none", r.ID, r.Definition)
		}
	}
	if len(got) != 2 || !((got[0] == before[0] && got[1] == before[1]) || (got[0] == before[1] && got[1] == before[0])) {
		t.Errorf("RunList by key after the upgrade = %v, want %v", got, before)
	}
	res, err := st.RunCreate(c, persistence.RunCreateParams{ID: newID(t), Workflow: "a", Definition: "abc", Now: t0, Steps: specs("x")})
	if err != nil || getRun(t, st, res.Run.ID).Definition != "abc" {
		t.Errorf("a run with a definition after the upgrade: %v", err)
	}
	upsert(t, st, def("a", "abc", 1, t0))
	if got := listDefinitions(t, st, ""); len(got) != 1 {
		t.Errorf("definitions after the upgrade = %v", versions(got))
	}
	if _, err := st.APIKeyCreate(c, key(t, "ci", persistence.ScopeRead, "secret", t0)); err != nil {
		t.Errorf("APIKeyCreate after the upgrade: %v", err)
	}
}
