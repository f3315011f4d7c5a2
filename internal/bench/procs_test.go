package bench

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// testChildEnv makes this test binary, started as a worker process of a
// --procs session, misbehave: "exit" exits at once, "ready-exit" says
// ready and exits soon after.
const testChildEnv = "DAGFLOW_BENCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(ChildEnv) != "" {
		switch os.Getenv(testChildEnv) {
		case "exit":
			os.Exit(3)
		case "ready-exit":
			fmt.Println("ready")
			time.Sleep(300 * time.Millisecond)
			os.Exit(4)
		}
		fmt.Fprintln(os.Stderr, "worker process of a test started without", testChildEnv)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// procsConfig is the flags' defaults for a --procs session on the test
// servers, with one worker process.
func procsConfig(t *testing.T) Config {
	t.Helper()
	redisAddr := testenv.RequireRedis(t)
	dsn := testenv.MySQLDSN()
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Ping(); err != nil {
		cfg, _ := gomysql.ParseDSN(dsn)
		testenv.Unavailable(t, "mysql at "+cfg.Addr, err)
	}
	var cfg Config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	cfg.RegisterFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg.MySQLDSN = dsn
	cfg.RedisAddr = redisAddr
	cfg.Procs = 1
	cfg.Runs = 10
	cfg.Warmup = 0
	cfg.Workers = 4
	cfg.Timeout = 5 * time.Minute
	return cfg
}

// A worker process that dies, before it is ready or in the middle of the
// session, fails the session at once, naming how it ended, instead of
// hanging until --timeout.
func TestProcsChildDies(t *testing.T) {
	for _, tc := range []struct{ mode, want string }{
		{"exit", "exit status 3"},
		{"ready-exit", "exit status 4"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cfg := procsConfig(t)
			t.Setenv(testChildEnv, tc.mode)
			done := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := RunProcs(context.Background(), cfg, io.Discard)
				done <- err
			}()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("RunProcs: %v; want an error with %q", err, tc.want)
				}
				if d := time.Since(start); d > 30*time.Second {
					t.Errorf("RunProcs took %v to notice the dead worker process", d)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("RunProcs has not returned %v after its worker process exited", time.Since(start))
			}
		})
	}
}

// On a Cluster node a SCAN batch holds keys of many slots; deletePrefix
// must delete them all (a multi-key UNLINK fails with CROSSSLOT), and
// nothing outside the prefix.
func TestDeletePrefixCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster; skipped under -short")
	}
	cl := testenv.StartCluster(t, 3, 0)
	ctx := context.Background()
	cc := cl.Client(t)
	for i := range 200 {
		if err := cc.Set(ctx, fmt.Sprintf("p:{q%d}:k", i), "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cc.Set(ctx, "other:k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	var left int64
	for _, n := range cl.Nodes {
		rc := redis.NewClient(n.ClientOptions())
		if err := deletePrefix(ctx, rc, "p"); err != nil {
			t.Errorf("deletePrefix on %s: %v", n.Addr, err)
		}
		k, err := rc.DBSize(ctx).Result()
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		left += k
	}
	if left != 1 {
		t.Fatalf("%d keys left; want only other:k", left)
	}
	if n, _ := cc.Exists(ctx, "other:k").Result(); n != 1 {
		t.Fatal("deletePrefix deleted a key outside the prefix")
	}
}

// The worker's spec (an environment variable) carries no password; the
// worker gets it on stdin and rebuilds the same DSN.
func TestChildPasswordNotInEnv(t *testing.T) {
	const dsn = "bench:s3cret-pw@tcp(db.example:3306)/dagflow_bench_x?parseTime=true"
	mc, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	childDSNText, password := splitPassword(mc)
	raw, err := json.Marshal(childSpec{DSN: childDSNText, PasswordOnStdin: password != ""})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "s3cret-pw") {
		t.Fatalf("the spec passed in the environment holds the password: %s", raw)
	}
	var spec childSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	rd := bufio.NewReader(strings.NewReader(password + "\nrest"))
	got, err := childDSN(spec, rd)
	if err != nil {
		t.Fatal(err)
	}
	if got != mc.FormatDSN() {
		t.Errorf("worker DSN %q, want %q", got, mc.FormatDSN())
	}
	if rest, _ := io.ReadAll(rd); string(rest) != "rest" {
		t.Errorf("after the password stdin holds %q, want %q", rest, "rest")
	}
	if _, err := childDSN(spec, bufio.NewReader(strings.NewReader(""))); err == nil {
		t.Error("childDSN with no password on stdin: no error")
	}
	if e := redactErr(errors.New("dial bench:s3cret-pw@db"), "s3cret-pw"); strings.Contains(e.Error(), "s3cret-pw") {
		t.Errorf("redactErr kept the password: %v", e)
	}
}
