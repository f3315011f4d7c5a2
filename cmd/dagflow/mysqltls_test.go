package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"database/sql"
	"encoding/pem"
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

	"github.com/go-sql-driver/mysql"

	"github.com/dagflow/dagflow/internal/redisconn"
	"github.com/dagflow/dagflow/internal/testenv"
)

// TestMySQLOverTLSWithPrivateCA starts a private MariaDB that accepts
// only TLS connections, with a certificate from a CA made here: the CLI
// reaches it with --mysql-tls-ca, and without it (or with another CA) it
// fails saying why.
func TestMySQLOverTLSWithPrivateCA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a MariaDB server")
	}
	dir := t.TempDir()
	ca, caCert, caKey := newCA(t, dir, "ca")
	serverCert, serverKey := issueServerCert(t, dir, caCert, caKey)
	other, _, _ := newCA(t, dir, "other-ca")
	addr := startTLSMariaDB(t, dir, ca, serverCert, serverKey)
	dsn := "root@tcp(" + addr + ")/dagflow"

	// The database, over TLS (the server refuses anything else).
	tc, err := redisconn.LoadTLS(ca, "", "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := mysql.RegisterTLSConfig("dagflow-test-setup", tc); err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", "root@tcp("+addr+")/?tls=dagflow-test-setup")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec("CREATE DATABASE dagflow"); err != nil {
		t.Fatalf("create database over TLS: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if code, out, errb := runCLI(t, ctx, "migrate", "--mysql-dsn", dsn, "--mysql-tls-ca", ca); code != 0 {
		t.Fatalf("migrate over TLS exited %d: %s %s", code, out, errb)
	}
	t.Setenv("DAGFLOW_MYSQL_TLS_CA", ca)
	if code, out, errb := runCLI(t, ctx, "runs", "--mysql-dsn", dsn); code != 0 || !strings.HasPrefix(out, "RUN") {
		t.Fatalf("runs over TLS (CA from DAGFLOW_MYSQL_TLS_CA) exited %d: %q %q", code, out, errb)
	}
	t.Setenv("DAGFLOW_MYSQL_TLS_CA", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		// MariaDB refuses a plain connection under
		// require_secure_transport as access denied.
		{nil, "Access denied"},
		{[]string{"--mysql-tls-ca", other}, "certificate signed by unknown authority"},
	} {
		code, out, errb := runCLI(t, ctx, append([]string{"runs", "--mysql-dsn", dsn}, tc.args...)...)
		if code != 1 || !strings.Contains(errb, tc.want) {
			t.Errorf("runs %q exited %d with %q %q; want an error naming %q", tc.args, code, out, errb, tc.want)
		}
	}
}

// startTLSMariaDB initializes a data directory and starts mariadbd on a
// free loopback port, TLS required, root without a password; killed with the test.
func startTLSMariaDB(t *testing.T, dir, ca, cert, key string) string {
	t.Helper()
	for _, bin := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := exec.LookPath(bin); err != nil {
			testenv.Unavailable(t, bin, err)
		}
	}
	data := filepath.Join(dir, "data")
	install := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := testenv.FreePort(t)
	cmd := exec.Command("mariadbd", "--no-defaults", "--datadir="+data, "--user=root",
		"--port="+strconv.Itoa(port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "mysqld.sock"),
		"--pid-file="+filepath.Join(dir, "mysqld.pid"), "--require-secure-transport=ON",
		"--ssl-ca="+ca, "--ssl-cert="+cert, "--ssl-key="+key, "--innodb-buffer-pool-size=32M", "--skip-log-bin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	logFile, err := os.Create(filepath.Join(dir, "mysqld.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logFile.Close() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "mysqld.log"))
			t.Fatalf("mariadbd on %s did not listen: %v\n%s", addr, err, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newCA writes a self-signed CA certificate as dir/name.pem.
func newCA(t *testing.T, dir, name string) (string, *x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dagflow test " + name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	path := filepath.Join(dir, name+".pem")
	writePEMFile(t, path, "CERTIFICATE", der)
	return path, cert, key
}

// issueServerCert writes a server certificate for 127.0.0.1 and localhost
// signed by the CA, and its key.
func issueServerCert(t *testing.T, dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	writePEMFile(t, cert, "CERTIFICATE", der)
	writePEMFile(t, keyFile, "PRIVATE KEY", keyDER)
	return cert, keyFile
}

func writePEMFile(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
