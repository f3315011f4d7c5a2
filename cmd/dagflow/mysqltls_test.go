package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/dagflow/dagflow/internal/redisconn"
	"github.com/dagflow/dagflow/internal/testenv"
)

// TestMySQLOverTLSWithPrivateCA starts a private MariaDB that accepts
// only TLS connections, with a certificate from a private CA: the CLI
// reaches it with --mysql-tls-ca, and without it (or with another CA) it
// fails saying why.
func TestMySQLOverTLSWithPrivateCA(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a MariaDB server")
	}
	ca, other := testenv.NewCA(t), testenv.NewCA(t)
	addr := testenv.StartMariaDB(t, testenv.MariaDBOptions{TLS: ca, RequireSecureTransport: true}).Addr
	dsn := "root@tcp(" + addr + ")/dagflow"

	// The database, over TLS (the server refuses anything else).
	tc, err := redisconn.LoadTLS(ca.CertFile, "", "", "")
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
	if code, out, errb := runCLI(t, ctx, "migrate", "--mysql-dsn", dsn, "--mysql-tls-ca", ca.CertFile); code != 0 {
		t.Fatalf("migrate over TLS exited %d: %s %s", code, out, errb)
	}
	t.Setenv("DAGFLOW_MYSQL_TLS_CA", ca.CertFile)
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
		{[]string{"--mysql-tls-ca", other.CertFile}, "certificate signed by unknown authority"},
	} {
		code, out, errb := runCLI(t, ctx, append([]string{"runs", "--mysql-dsn", dsn}, tc.args...)...)
		if code != 1 || !strings.Contains(errb, tc.want) {
			t.Errorf("runs %q exited %d with %q %q; want an error naming %q", tc.args, code, out, errb, tc.want)
		}
	}
}
