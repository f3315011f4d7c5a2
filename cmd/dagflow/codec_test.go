package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/codec/aesgcm"
	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
	"github.com/dagflow/dagflow/persistence/sqlite"
)

// cliBackend is a private store and Redis namespace with the flags that
// name them.
type cliBackend struct {
	st    persistence.Store
	rdb   redis.UniversalClient
	pfx   string
	flags []string
}

func cliBackends(t *testing.T) map[string]func(t *testing.T) cliBackend {
	return map[string]func(t *testing.T) cliBackend{
		"sqlite+miniredis": func(t *testing.T) cliBackend {
			path := filepath.Join(t.TempDir(), "dagflow.db")
			st, err := sqlite.Open(context.Background(), sqlite.Config{Path: path, AutoMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			m := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
			t.Cleanup(func() { rdb.Close() })
			return cliBackend{st, rdb, "dagflow", []string{"--sqlite", path, "--redis-addr", m.Addr(), "--prefix", "dagflow"}}
		},
		"mysql+redis": func(t *testing.T) cliBackend {
			addr := testenv.RequireRedis(t)
			dsn := testenv.MySQLDatabase(t)
			st, err := mysql.Open(context.Background(), mysql.Config{DSN: dsn, AutoMigrate: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			t.Cleanup(func() { rdb.Close() })
			prefix := testenv.KeyPrefix(t)
			testenv.DeleteKeys(t, rdb, prefix)
			return cliBackend{st, rdb, prefix, []string{"--mysql-dsn", dsn, "--redis-addr", addr, "--prefix", prefix}}
		},
	}
}

// keyFile writes a keyring file with the named keys, the first current;
// a key's bytes derive from its name.
func keyFile(t *testing.T, ids ...string) (string, *aesgcm.Codec) {
	t.Helper()
	var text strings.Builder
	for _, id := range ids {
		k := sha256.Sum256([]byte("test key " + id))
		text.WriteString(id + "=" + base64.StdEncoding.EncodeToString(k[:]) + "\n")
	}
	path := filepath.Join(t.TempDir(), strings.Join(ids, "-"))
	if err := os.WriteFile(path, []byte(text.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := aesgcm.ParseKeyring([]byte(text.String()))
	if err != nil {
		t.Fatal(err)
	}
	return path, c
}

// TestCodecRotate: a worker without the store's key refuses to start;
// `runs` lists a run sealed under a key the keyring
// lost, saying why its payloads are unreadable; `codec rotate` (after a
// --dry-run that writes nothing) re-encodes the store under the new key,
// so that the old key can go; a value no key opens is named and makes
// it exit 1; without a keyring it is refused.
func TestCodecRotate(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis and MariaDB")
	}
	for name, open := range cliBackends(t) {
		t.Run(name, func(t *testing.T) {
			b := open(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			k1, c1 := keyFile(t, "k1")
			k2, _ := keyFile(t, "k2")
			both, _ := keyFile(t, "k2", "k1")
			id := triggerOrderWith(t, ctx, b.st, b.rdb, b.pfx, c1)
			cli := func(args ...string) (int, string, string) {
				return runCLI(t, ctx, append(args, b.flags...)...)
			}
			// A worker that lacks k1, or any keyring, refuses to start.
			for _, args := range [][]string{{"worker", "--codec-keyring-file", k2}, {"worker"}} {
				if code, _, errb := cli(args...); code == 0 || !strings.Contains(errb, "codec probe") || !strings.Contains(errb, "--codec-keyring-file") {
					t.Errorf("%s: exit %d, %s; want a refusal naming the keyring option", strings.Join(args, " "), code, errb)
				}
			}
			// A listing reads no payloads; the run's page says why its input
			// is missing.
			if code, out, errb := cli("runs", "--codec-keyring-file", k2); code != 0 || !strings.Contains(out, id) {
				t.Errorf("runs with a keyring that lost k1: exit %d\n%s%s", code, out, errb)
			}
			if code, out, errb := cli("runs", "show", id, "--codec-keyring-file", k2); code != 0 ||
				!strings.Contains(out, `unreadable: decoding the input: aesgcm: input payload: encrypted with unknown key id "k1"`) {
				t.Errorf("runs show with a keyring that lost k1: exit %d\n%s%s", code, out, errb)
			}
			if code, _, errb := cli("codec", "rotate"); code != 2 || !strings.Contains(errb, "--codec-keyring-file") {
				t.Errorf("codec rotate without a keyring: exit %d, %s", code, errb)
			}
			code, out, errb := cli("codec", "rotate", "--dry-run", "--codec-keyring-file", both)
			if code != 0 || !strings.Contains(out, "WOULD RE-ENCODE") || !strings.Contains(out, "workflow_runs.input") {
				t.Errorf("codec rotate --dry-run: exit %d\n%s%s", code, out, errb)
			}
			if code, _, _ := cli("runs", "show", id, "--codec-keyring-file", k1); code != 0 {
				t.Errorf("after the dry run, k1 alone no longer reads the run: exit %d", code)
			}
			code, out, errb = cli("codec", "rotate", "--batch", "1", "--codec-keyring-file", both)
			if code != 0 || !strings.Contains(out, "every sealed payload is under key k2") {
				t.Errorf("codec rotate: exit %d\n%s%s", code, out, errb)
			}
			if code, out, errb := cli("runs", "show", id, "--codec-keyring-file", k2); code != 0 || strings.Contains(out, "unreadable") ||
				!strings.Contains(out, `"order_id":"o-1"`) {
				t.Errorf("runs show with k2 alone after the rotation: exit %d\n%s%s", code, out, errb)
			}

			// A value under a key nobody has is named; the command fails.
			_, c9 := keyFile(t, "k9")
			raw, err := b.st.RunGet(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			bad, _ := c9.Encode(ctx, "input", []byte(`{}`))
			if n, err := b.st.SealedUpdate(ctx, persistence.SealedUpdateParams{Column: "workflow_runs.input",
				Writes: []persistence.SealedWrite{{Key: []string{id}, Old: raw.Input, New: bad}}}); err != nil || n != 1 {
				t.Fatalf("planting a value under k9: %d, %v", n, err)
			}
			code, out, errb = cli("codec", "rotate", "--codec-keyring-file", both)
			if code != 1 || !strings.Contains(out, "cannot open workflow_runs.input "+id) || !strings.Contains(errb, "1 payload(s)") {
				t.Errorf("codec rotate with a value under k9: exit %d\n%s%s", code, out, errb)
			}
		})
	}
}
