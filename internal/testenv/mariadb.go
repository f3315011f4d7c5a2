package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// MariaDBOptions configure StartMariaDB.
type MariaDBOptions struct {
	// TLS makes the server offer TLS with the CA's server certificate
	// (clients may still connect in clear unless their user requires SSL:
	// see CreateUser).
	TLS *CA
	// RequireSecureTransport makes the server refuse every connection
	// that is not TLS (require_secure_transport); it needs TLS. The
	// server's root connection then uses TLS too.
	RequireSecureTransport bool
	// ServerID is the server's server_id (default 1): a primary and its
	// replica need different ones.
	ServerID int
	// Binlog writes the binary log, which a replica started with
	// ReplicateFrom reads.
	Binlog bool
}

// MariaDB is a private mariadbd owned by one test (or by a parent test
// and shared by its subtests, each with a database of its own: starting
// one costs about 3 seconds, mostly mariadb-install-db).
type MariaDB struct {
	// Addr is 127.0.0.1:Port.
	Addr string
	Port int
	// Opts are the options the server was started with.
	Opts MariaDBOptions

	root *sql.DB
	proc *Process
}

// innodbSmall keeps a test server's files and memory small.
var innodbSmall = []string{
	"--innodb-buffer-pool-size=32M",
	"--innodb-log-file-size=8M",
	"--innodb-data-file-path=ibdata1:4M:autoextend",
}

// StartMariaDB creates a data directory with mariadb-install-db in a
// temporary directory, starts mariadbd on a free loopback port (root with
// no password, reachable only from this machine), waits until it answers
// and stops it when the test ends or the test process dies.
func StartMariaDB(t testing.TB, opts MariaDBOptions) *MariaDB {
	t.Helper()
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			Unavailable(t, bin+" binary", err)
		}
	}
	dir := t.TempDir()
	// A Unix socket path must stay under 108 bytes; t.TempDir's may not.
	sockDir, err := os.MkdirTemp("", "mdb")
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	data := filepath.Join(dir, "data")
	runAs := currentUser(t)
	install := append([]string{"--no-defaults", "--auth-root-authentication-method=normal",
		"--skip-test-db", "--datadir=" + data, "--user=" + runAs}, innodbSmall...)
	cmd := exec.Command("mariadb-install-db", install...)
	dieWithTest(cmd)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testenv: mariadb-install-db: %v\n%s", err, out)
	}
	m := &MariaDB{Port: FreePort(t), Opts: opts}
	m.Addr = "127.0.0.1:" + strconv.Itoa(m.Port)
	args := append([]string{"--no-defaults", "--datadir=" + data,
		"--socket=" + filepath.Join(sockDir, "s"), "--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		"--port=" + strconv.Itoa(m.Port), "--bind-address=127.0.0.1", "--user=" + runAs,
		"--skip-name-resolve", "--log-error=" + filepath.Join(dir, "error.log")}, innodbSmall...)
	if opts.ServerID > 0 {
		args = append(args, "--server-id="+strconv.Itoa(opts.ServerID))
	}
	if opts.Binlog {
		args = append(args, "--log-bin="+filepath.Join(dir, "binlog"), "--binlog-format=ROW")
	}
	if opts.TLS != nil {
		args = append(args, "--ssl-ca="+opts.TLS.CertFile, "--ssl-cert="+opts.TLS.ServerCertFile, "--ssl-key="+opts.TLS.ServerKeyFile)
	}
	rootCfg, err := mysql.ParseDSN(m.DSN("root", "", ""))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	if opts.RequireSecureTransport {
		if opts.TLS == nil {
			t.Fatal("testenv: MariaDBOptions.RequireSecureTransport needs TLS")
		}
		args = append(args, "--require-secure-transport=ON")
		rootCfg.TLS = opts.TLS.ClientTLS()
	}
	m.proc = StartProcess(t, "mariadbd", args...)
	connector, err := mysql.NewConnector(rootCfg)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	root := sql.OpenDB(connector)
	m.root = root
	t.Cleanup(func() { root.Close() })
	waitFor(t, 30*time.Second, "mariadbd on "+m.Addr+" answers", func() (bool, string) {
		if m.proc.Exited() {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("testenv: mariadbd exited:\n%s", log)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		err := root.PingContext(ctx)
		return err == nil, fmt.Sprint(err)
	})
	return m
}

// currentUser is the user mariadbd runs as: the test's own (root when the
// tests run as root, which mariadbd accepts only when told so).
func currentUser(t testing.TB) string {
	u, err := user.Current()
	if err != nil {
		t.Fatalf("testenv: current user: %v", err)
	}
	return u.Username
}

// DSN returns a go-sql-driver DSN for user with password on database db
// (none when empty), with parseTime.
func (m *MariaDB) DSN(user, password, db string) string {
	c := mysql.NewConfig()
	c.User, c.Passwd, c.Net, c.Addr, c.DBName = user, password, "tcp", m.Addr, db
	c.ParseTime = true
	return c.FormatDSN()
}

// Database creates a database private to the test, drops it when the
// test ends, and returns its name.
func (m *MariaDB) Database(t testing.TB) string {
	t.Helper()
	name := "dftest_" + RandomSuffix(12)
	m.Exec(t, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	t.Cleanup(func() { m.cleanup(t, "DROP DATABASE IF EXISTS `"+name+"`") })
	return name
}

// Grant says what CreateUser grants, and how the user must connect.
type Grant struct {
	// Privileges on the database, e.g. "SELECT, INSERT, UPDATE, DELETE".
	Privileges string
	// RequireX509 makes the user connect with TLS and a client certificate
	// signed by the server's CA (REQUIRE X509); RequireSSL only with TLS.
	RequireX509, RequireSSL bool
}

// CreateUser creates user@'%' with password, grants opts.Privileges on
// every table of db, and drops the user when the test ends.
func (m *MariaDB) CreateUser(t testing.TB, user, password, db string, opts Grant) {
	t.Helper()
	if opts.Privileges == "" {
		t.Fatalf("testenv: CreateUser %s: no privileges given", user)
	}
	require := ""
	switch {
	case opts.RequireX509:
		require = " REQUIRE X509"
	case opts.RequireSSL:
		require = " REQUIRE SSL"
	}
	m.Exec(t, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'%s", user, password, require))
	t.Cleanup(func() { m.cleanup(t, fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	m.Exec(t, fmt.Sprintf("GRANT %s ON `%s`.* TO '%s'@'%%'", opts.Privileges, db, user))
}

// Exec runs a statement as root and fails the test on an error.
func (m *MariaDB) Exec(t testing.TB, query string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.root.ExecContext(ctx, query); err != nil {
		t.Fatalf("testenv: %s: %v", query, err)
	}
}

// cleanup runs a statement as root at the end of a test.
func (m *MariaDB) cleanup(t testing.TB, query string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.root.ExecContext(ctx, query); err != nil {
		t.Errorf("testenv: %s: %v", query, err)
	}
}

// ReplicateFrom makes m a replica of primary (started with
// MariaDBOptions.Binlog and another ServerID), from the start of the
// primary's binary log, and waits until both replication threads run.
// Everything done on the primary since it started (its databases, their
// tables and rows) reaches m.
func (m *MariaDB) ReplicateFrom(t testing.TB, primary *MariaDB) {
	t.Helper()
	if !primary.Opts.Binlog {
		t.Fatal("testenv: ReplicateFrom: the primary writes no binary log (MariaDBOptions.Binlog)")
	}
	user, password := "repl_"+RandomSuffix(6), RandomSuffix(16)
	primary.Exec(t, fmt.Sprintf("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY '%s'", user, password))
	primary.Exec(t, fmt.Sprintf("GRANT REPLICATION SLAVE ON *.* TO '%s'@'127.0.0.1'", user))
	m.Exec(t, fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='%s', MASTER_PASSWORD='%s', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1",
		primary.Port, user, password))
	m.Exec(t, "START SLAVE")
	waitFor(t, 30*time.Second, "replica "+m.Addr+" of "+primary.Addr+" runs", func() (bool, string) {
		st := m.ReplicaStatus(t)
		return st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes",
			fmt.Sprintf("IO %s, SQL %s, last error %q", st["Slave_IO_Running"], st["Slave_SQL_Running"], st["Last_Error"]+st["Last_IO_Error"])
	})
}

// ReplicaStatus returns SHOW SLAVE STATUS as column -> value (empty when
// m replicates from nothing).
func (m *MariaDB) ReplicaStatus(t testing.TB) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := m.root.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		t.Fatalf("testenv: SHOW SLAVE STATUS: %v", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatalf("testenv: SHOW SLAVE STATUS: %v", err)
	}
	st := map[string]string{}
	if rows.Next() {
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatalf("testenv: SHOW SLAVE STATUS: %v", err)
		}
		for i, c := range cols {
			st[c] = vals[i].String
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("testenv: SHOW SLAVE STATUS: %v", err)
	}
	return st
}

// Kill SIGKILLs the server: it answers nothing from then on.
func (m *MariaDB) Kill() { m.proc.Kill() }
