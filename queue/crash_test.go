package queue

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

// crashChildEnv makes the test binary act as a crashing worker: it leases
// one task from the queue named in it, reports it on stdout and hangs
// until killed.
const crashChildEnv = "DAGFLOW_QUEUE_CRASH_CHILD"

const crashLease = 700 * time.Millisecond

func crashChild() {
	// DAGFLOW_QUEUE_CRASH_CHILD=<redis addr> <prefix> <queue>
	f := strings.Fields(os.Getenv(crashChildEnv))
	c := redis.NewClient(&redis.Options{Addr: f[0]})
	q, err := New(Config{Client: c, Prefix: f[1]})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tasks, err := q.Dequeue(ctx, DequeueParams{Queues: []string{f[2]}, Lease: crashLease})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	fmt.Printf("leased %s %d\n", tasks[0].ID, tasks[0].Deliveries)
	select {} // working on it, until SIGKILL
}

func TestCrashedWorkerTaskIsRedelivered(t *testing.T) {
	c := newRealRedis(t)
	prefix := testenv.KeyPrefix(t)
	q := newTestQueue(t, c, Config{Prefix: prefix, PollInterval: 100 * time.Millisecond})
	mustEnqueue(t, q, "crash", Item{ID: "0192f3a4-5b6c-7d8e-9f00-112233445566/reserve/1"})

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+testenv.RedisAddr()+" "+prefix+" crash")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("child said %q: %v", line, err)
	}
	if want := "leased 0192f3a4-5b6c-7d8e-9f00-112233445566/reserve/1 1\n"; line != want {
		t.Fatalf("child said %q, want %q", line, want)
	}
	leasedAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	wantStats(t, q, "crash", Stats{Leased: 1})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tasks, err := q.Dequeue(ctx, DequeueParams{Queues: []string{"crash"}, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if got := time.Since(leasedAt); got < crashLease-100*time.Millisecond {
		t.Fatalf("redelivered after %v, before the %v lease ran out", got, crashLease)
	}
	if tasks[0].Deliveries != 2 {
		t.Fatalf("redelivered %+v, want 2 deliveries", tasks[0])
	}
	if err := q.Ack(ctx, "crash", tasks[0].ID); err != nil {
		t.Fatal(err)
	}
	wantStats(t, q, "crash", Stats{})
}
