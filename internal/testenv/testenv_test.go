package testenv_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
)

const childEnv = "DAGFLOW_TESTENV_CHILD"

// TestServersDieWithTheTestProcess kills a test process that started a
// redis-server, without letting it run its cleanups (as a test timeout or
// an OOM kill does), and requires the server to be gone.
func TestServersDieWithTheTestProcess(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		s := testenv.StartRedis(t)
		fmt.Printf("addr %s\n", s.Addr)
		time.Sleep(time.Minute) // until the parent kills this process
		return
	}
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServersDieWithTheTestProcess$", "-test.v")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var addr string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
			addr = a
			break
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	if addr == "" {
		t.Fatal("the child test printed no server address")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return // gone
		}
		c.Close()
		if time.Now().After(deadline) {
			// Leave nothing behind: stop the orphan through its own port.
			redis.NewClient(&redis.Options{Addr: addr}).ShutdownNoSave(context.Background())
			t.Fatalf("the redis-server on %s outlived the test process that started it", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCA checks the CA's files with a TLS server of Go's that requires a
// client certificate: the client configuration passes, a client without
// the certificate or without the CA fails.
func TestCA(t *testing.T) {
	ca := testenv.NewCA(t)
	for _, f := range []string{ca.CertFile, ca.ServerCertFile, ca.ServerKeyFile, ca.ClientCertFile, ca.ClientKeyFile} {
		if _, err := os.Stat(f); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := tls.LoadX509KeyPair(ca.ServerCertFile, ca.ServerKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.(*tls.Conn).Handshake()
				c.Write([]byte("hello"))
			}()
		}
	}()
	dial := func(cfg *tls.Config) (string, error) {
		c, err := tls.Dial("tcp", l.Addr().String(), cfg)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 5)
		_, err = c.Read(b)
		return string(b), err
	}
	if got, err := dial(ca.ClientTLS()); err != nil || got != "hello" {
		t.Errorf("with the client configuration: %q, %v; want hello", got, err)
	}
	noCert := ca.ClientTLS()
	noCert.Certificates = nil
	if _, err := dial(noCert); err == nil {
		t.Error("a client without a certificate was served")
	}
	noCA := ca.ClientTLS()
	noCA.RootCAs = nil
	if _, err := dial(noCA); err == nil {
		t.Error("a client that does not trust the CA connected")
	}
}

// TestStartRedisWith starts the servers the production setups need and
// checks each enforces what it was started with.
func TestStartRedisWith(t *testing.T) {
	ctx := context.Background()
	t.Run("ACL", func(t *testing.T) {
		s := testenv.StartRedisWith(t, testenv.RedisOptions{Users: []string{"app on >s3cret ~app:* -@all +set +get +ping"}})
		c := redis.NewClient(s.UserOptions("app", "s3cret"))
		defer c.Close()
		if err := c.Set(ctx, "app:k", "v", 0).Err(); err != nil {
			t.Errorf("SET under the user's prefix: %v", err)
		}
		if err := c.Set(ctx, "other:k", "v", 0).Err(); !isNoPerm(err) {
			t.Errorf("SET outside the prefix: %v, want NOPERM", err)
		}
		if err := c.Del(ctx, "app:k").Err(); !isNoPerm(err) {
			t.Errorf("DEL, not granted: %v, want NOPERM", err)
		}
		bad := redis.NewClient(s.UserOptions("app", "wrong"))
		defer bad.Close()
		if err := bad.Ping(ctx).Err(); err == nil {
			t.Error("a wrong password was accepted")
		}
	})
	t.Run("Password", func(t *testing.T) {
		s := testenv.StartRedisWith(t, testenv.RedisOptions{Password: "pw"})
		if err := s.Client(t).Ping(ctx).Err(); err != nil {
			t.Errorf("with the password: %v", err)
		}
		c := redis.NewClient(&redis.Options{Addr: s.Addr})
		defer c.Close()
		if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
			t.Errorf("without the password: %v, want NOAUTH", err)
		}
		if got, want := s.URL("", "pw"), "redis://:pw@"+s.Addr; got != want {
			t.Errorf("URL = %q, want %q", got, want)
		}
	})
	t.Run("TLS", func(t *testing.T) {
		ca := testenv.NewCA(t)
		s := testenv.StartRedisWith(t, testenv.RedisOptions{TLS: ca})
		if err := s.Client(t).Ping(ctx).Err(); err != nil {
			t.Errorf("over TLS with the client certificate: %v", err)
		}
		plain := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1, DialTimeout: time.Second, ReadTimeout: time.Second})
		defer plain.Close()
		if err := plain.Ping(ctx).Err(); err == nil {
			t.Error("a plain-text client was served")
		}
		o := s.ClientOptions()
		o.TLSConfig.Certificates = nil
		o.MaxRetries = -1
		noCert := redis.NewClient(o)
		defer noCert.Close()
		if err := noCert.Ping(ctx).Err(); err == nil {
			t.Error("a client without a certificate was served (tls-auth-clients yes)")
		}
		if got, want := s.URL("u", "p"), "rediss://u:p@"+s.Addr; got != want {
			t.Errorf("URL = %q, want %q", got, want)
		}
	})
}

func isNoPerm(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(err.Error(), "NOPERM")
}
