package redisconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// TestOpenSentinel: a master with a password behind a sentinel with a
// password of its own; the URL names the sentinel, the master and both
// passwords.
func TestOpenSentinel(t *testing.T) {
	const masterPass, sentinelPass = "master-pass-1", "sentinel-pass-2"
	master := testenv.StartRedisWith(t, testenv.RedisOptions{Password: masterPass})
	sentinel := testenv.StartSentinelOf(t, master, testenv.SentinelOptions{MasterName: "mymaster", Password: sentinelPass})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	u := fmt.Sprintf("redis+sentinel://:%s@%s/mymaster/2?sentinel_password=%s", masterPass, sentinel, sentinelPass)
	c, err := Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	client, err := Open(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", Redact(u), err)
	}
	defer client.Close()
	if err := client.Set(ctx, "redisconn-sentinel", "ok", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	// The key is on the master, in database 2.
	mo := master.ClientOptions()
	mo.DB = 2
	direct := redis.NewClient(mo)
	defer direct.Close()
	if v, err := direct.Get(ctx, "redisconn-sentinel").Result(); err != nil || v != "ok" {
		t.Errorf("the master's db 2 holds %q, %v", v, err)
	}

	// A wrong sentinel password: the error names the sentinel and the
	// master, not the passwords.
	c, _ = Parse(fmt.Sprintf("redis+sentinel://:%s@%s/mymaster?sentinel_password=wrong-sentinel-pw", masterPass, sentinel))
	_, err = Open(ctx, c)
	if err == nil || !strings.Contains(err.Error(), sentinel+" master mymaster (user default, sentinel user default): authentication failed") ||
		strings.Contains(err.Error(), "wrong-sentinel-pw") || strings.Contains(err.Error(), masterPass) {
		t.Errorf("a wrong sentinel password: %v", err)
	}
	t.Logf("a wrong sentinel password: %v", err)
}

// TestOpenCluster: three masters sharing the slots; the URL names two of
// them, and keys of every slot range are written and read.
func TestOpenCluster(t *testing.T) {
	cluster := testenv.StartCluster(t, 3, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	u := "redis+cluster://" + cluster.Addrs[0] + "," + cluster.Addrs[1]
	c, err := Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	client, err := Open(ctx, c)
	if err != nil {
		t.Fatalf("%s: %v", u, err)
	}
	defer client.Close()
	if _, ok := client.(*redis.ClusterClient); !ok {
		t.Fatalf("Open(%s) made a %T, want a cluster client", u, client)
	}
	for i := range 30 {
		k := fmt.Sprintf("redisconn-cluster-%d", i)
		if err := client.Set(ctx, k, i, time.Minute).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		if v, err := client.Get(ctx, k).Int(); err != nil || v != i {
			t.Fatalf("GET %s = %d, %v", k, v, err)
		}
	}
}

// TestOpenSentinelUnknownMaster: a master name the sentinels do not know
// is an error naming that name and the sentinels, not go-redis's
// "redis: nil".
func TestOpenSentinelUnknownMaster(t *testing.T) {
	master := testenv.StartRedis(t)
	sentinel := testenv.StartSentinelOf(t, master, testenv.SentinelOptions{MasterName: "mymaster"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Parse("redis+sentinel://" + sentinel + "/nosuchmaster")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, c)
	var re *Error
	if !errors.As(err, &re) || re.What != "unknown master" {
		t.Fatalf("an unknown master name: %v, want an unknown master error", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, `"nosuchmaster"`) || !strings.Contains(msg, sentinel) || strings.Contains(msg, "redis: nil") {
		t.Errorf("an unknown master name: %q does not name the master and the sentinel %s", msg, sentinel)
	}
}
