package redisconn

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dagflow/dagflow/internal/testenv"
)

// TestOpenAuthentication: a server with requirepass. The right password
// connects; a wrong or missing one is an authentication error naming the
// server and the user, never the password.
func TestOpenAuthentication(t *testing.T) {
	const pass = "correct-horse-battery"
	addr := testenv.StartRedisWith(t, testenv.RedisOptions{Password: pass}).Addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := Parse("redis://:" + pass + "@" + addr + "/0")
	if err != nil {
		t.Fatal(err)
	}
	client, err := Open(ctx, c)
	if err != nil {
		t.Fatalf("the right password: %v", err)
	}
	client.Close()

	for _, u := range []string{
		"redis://:wrong-password-42@" + addr,
		"redis://app:wrong-password-42@" + addr,
		"redis://" + addr,
	} {
		c, err := Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Open(ctx, c)
		var re *Error
		if !errors.As(err, &re) || re.What != "authentication failed" {
			t.Errorf("%s: %v, want an authentication error", Redact(u), err)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "wrong-password-42") || strings.Contains(msg, pass) {
			t.Errorf("%s: the error shows a password: %s", Redact(u), msg)
		}
		wantUser := "(user default)"
		if c.Username == "app" {
			wantUser = "(user app)"
		}
		if !strings.Contains(msg, addr) || !strings.Contains(msg, wantUser) {
			t.Errorf("%s: %q does not name the server and %s", Redact(u), msg, wantUser)
		}
	}
}

// TestOpenTLS: a TLS-only server with a private CA that requires client
// certificates.
func TestOpenTLS(t *testing.T) {
	ca := testenv.NewCA(t)
	host := testenv.StartRedisWith(t, testenv.RedisOptions{TLS: ca, TLSAuthClients: "yes"}).Addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	good := "rediss://" + host + "/0?ca=" + ca.CertFile + "&cert=" + ca.ClientCertFile + "&key=" + ca.ClientKeyFile
	c, err := Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	client, err := Open(ctx, c)
	if err != nil {
		t.Fatalf("TLS with the private CA and a client certificate: %v", err)
	}
	if err := client.Set(ctx, "redisconn-tls-test", "ok", time.Minute).Err(); err != nil {
		t.Errorf("SET over TLS: %v", err)
	}
	client.Close()

	for _, tc := range []struct{ url, want string }{
		// The system's authorities do not know the private CA.
		{"rediss://" + host + "?cert=" + ca.ClientCertFile + "&key=" + ca.ClientKeyFile, "TLS failed"},
		// The certificate is for 127.0.0.1 and localhost, not this name.
		{good + "&server_name=other.example", "TLS failed"},
		// Plain text to a TLS port.
		{"redis://" + host + "?dial_timeout=2s&read_timeout=2s", ""},
	} {
		c, err := Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Open(ctx, c)
		var re *Error
		if !errors.As(err, &re) || (tc.want != "" && re.What != tc.want) || !strings.Contains(err.Error(), host) {
			t.Errorf("%s: %v, want %q naming %s", tc.url, err, tc.want, host)
		}
	}

	for _, tc := range []struct{ url, want string }{
		{"rediss://" + host + "?ca=" + filepath.Join(ca.Dir, "missing.pem"), "missing.pem"},
		{"rediss://" + host + "?ca=" + ca.ClientKeyFile, "holds no PEM certificate"},
		{"rediss://" + host + "?ca=" + ca.CertFile + "&cert=" + ca.ClientCertFile + "&key=" + ca.ServerKeyFile, "client certificate"},
	} {
		c, err := Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Open(ctx, c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %s", tc.url, err, tc.want)
		}
	}
}

// TestOpenShortWrongPassword: a wrong password that is also the start of
// the server's answer ("WRONG" of "WRONGPASS") is not masked inside that
// word, so the error still says the authentication failed and quotes the
// server's code whole.
func TestOpenShortWrongPassword(t *testing.T) {
	addr := testenv.StartRedisWith(t, testenv.RedisOptions{Password: "correct-horse-battery"}).Addr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, pass := range []string{"WRONG", "PASS", "invalid"} {
		c, err := Parse("redis://:" + pass + "@" + addr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Open(ctx, c)
		var re *Error
		if !errors.As(err, &re) || re.What != "authentication failed" || !strings.Contains(re.Msg, "WRONGPASS") {
			t.Errorf("password %q: %v, want an authentication error quoting WRONGPASS", pass, err)
		}
	}
}
