package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a private certificate authority made for one test, with a server
// certificate for 127.0.0.1 and localhost and a client certificate, all
// written as PEM files into the test's temporary directory (a server or a
// CLI under test reads them from there).
type CA struct {
	// Dir holds the files below.
	Dir string
	// CertFile is the CA's certificate (ca.pem): what clients and servers
	// trust.
	CertFile string
	// ServerCertFile and ServerKeyFile are the server's certificate and
	// key, valid for 127.0.0.1, ::1 and localhost.
	ServerCertFile, ServerKeyFile string
	// ClientCertFile and ClientKeyFile are a client certificate (common
	// name "dagflow-client") and its key.
	ClientCertFile, ClientKeyFile string

	pool   *x509.CertPool
	client tls.Certificate
}

// NewCA creates a CA and its certificates (ECDSA P-256, valid for a day)
// in t.TempDir().
func NewCA(t testing.TB) *CA {
	t.Helper()
	dir := t.TempDir()
	ca := &CA{
		Dir:            dir,
		CertFile:       filepath.Join(dir, "ca.pem"),
		ServerCertFile: filepath.Join(dir, "server.pem"),
		ServerKeyFile:  filepath.Join(dir, "server-key.pem"),
		ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile:  filepath.Join(dir, "client-key.pem"),
		pool:           x509.NewCertPool(),
	}
	now := time.Now()
	root := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: "dagflow test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	rootKey := newKey(t)
	rootDER := sign(t, root, root, rootKey, rootKey)
	rootCert, err := x509.ParseCertificate(rootDER)
	if err != nil {
		t.Fatalf("testenv: parse CA certificate: %v", err)
	}
	ca.pool.AddCert(rootCert)
	writePEM(t, ca.CertFile, "CERTIFICATE", rootDER)

	leaf := func(cn string, usage x509.ExtKeyUsage, certFile, keyFile string) tls.Certificate {
		tmpl := &x509.Certificate{
			SerialNumber: serial(t),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		key := newKey(t)
		der := sign(t, tmpl, rootCert, key, rootKey)
		writePEM(t, certFile, "CERTIFICATE", der)
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatalf("testenv: marshal key: %v", err)
		}
		writePEM(t, keyFile, "PRIVATE KEY", keyDER)
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatalf("testenv: load %s: %v", certFile, err)
		}
		return pair
	}
	leaf("localhost", x509.ExtKeyUsageServerAuth, ca.ServerCertFile, ca.ServerKeyFile)
	ca.client = leaf("dagflow-client", x509.ExtKeyUsageClientAuth, ca.ClientCertFile, ca.ClientKeyFile)
	return ca
}

// ClientTLS returns a new client configuration that trusts only the CA,
// presents the client certificate and expects the server name
// 127.0.0.1 (the address the test servers listen on).
func (ca *CA) ClientTLS() *tls.Config {
	return &tls.Config{
		RootCAs:      ca.pool,
		Certificates: []tls.Certificate{ca.client},
		ServerName:   "127.0.0.1",
		MinVersion:   tls.VersionTLS12,
	}
}

// Pool returns the certificate pool holding only the CA.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testenv: generate key: %v", err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("testenv: serial number: %v", err)
	}
	return n
}

func sign(t testing.TB, tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), parentKey)
	if err != nil {
		t.Fatalf("testenv: sign %q: %v", tmpl.Subject.CommonName, err)
	}
	return der
}

// writePEM writes one PEM block.
func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatalf("testenv: write %s: %v", path, err)
	}
}
