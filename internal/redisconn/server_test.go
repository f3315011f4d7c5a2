package redisconn

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startRedis starts a private redis-server with args on a free loopback
// port, killed when the test (or the test binary) ends, and returns the
// port. tlsPort makes the port a TLS one.
func startRedis(t *testing.T, tlsPort bool, args ...string) int {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skipf("redis-server not installed: %v", err)
	}
	port := freePort(t)
	base := []string{"--port", strconv.Itoa(port)}
	if tlsPort {
		base = []string{"--port", "0", "--tls-port", strconv.Itoa(port)}
	}
	base = append(base, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--loglevel", "warning")
	cmd := exec.Command("redis-server", append(base, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitListen(t, port)
	return port
}

// waitListen waits until a server listens on the loopback port.
func waitListen(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server listens on port %d: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestOpenAuthentication: a server with requirepass. The right password
// connects; a wrong or missing one is an authentication error naming the
// server and the user, never the password.
func TestOpenAuthentication(t *testing.T) {
	const pass = "correct-horse-battery"
	port := startRedis(t, false, "--requirepass", pass)
	addr := "127.0.0.1:" + strconv.Itoa(port)
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
	dir := t.TempDir()
	pki := newPKI(t, dir)
	port := startRedis(t, true, "--tls-cert-file", pki.serverCert, "--tls-key-file", pki.serverKey,
		"--tls-ca-cert-file", pki.ca, "--tls-auth-clients", "yes")
	host := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	good := "rediss://" + host + "/0?ca=" + pki.ca + "&cert=" + pki.clientCert + "&key=" + pki.clientKey
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
		{"rediss://" + host + "?cert=" + pki.clientCert + "&key=" + pki.clientKey, "TLS failed"},
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
		{"rediss://" + host + "?ca=" + filepath.Join(dir, "missing.pem"), "missing.pem"},
		{"rediss://" + host + "?ca=" + pki.clientKey, "holds no PEM certificate"},
		{"rediss://" + host + "?ca=" + pki.ca + "&cert=" + pki.clientCert + "&key=" + pki.serverKey, "client certificate"},
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

type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

// newPKI writes a private CA, a server certificate for 127.0.0.1 and
// localhost, and a client certificate, as PEM files in dir.
func newPKI(t *testing.T, dir string) testPKI {
	t.Helper()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dagflow test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	p := testPKI{ca: filepath.Join(dir, "ca.pem")}
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	issue := func(name string, serial int64, usage x509.ExtKeyUsage) (string, string) {
		key := newKey(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		cert, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		writePEM(t, cert, "CERTIFICATE", der)
		writePEM(t, keyFile, "EC PRIVATE KEY", keyDER)
		return cert, keyFile
	}
	p.serverCert, p.serverKey = issue("server", 2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = issue("client", 3, x509.ExtKeyUsageClientAuth)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
