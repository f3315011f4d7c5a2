package setups

import (
	"context"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/testenv"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// TestMariaDB starts one private MariaDB with TLS from a private CA (about
// 3 seconds) and runs the orders on it, each subtest with a database of
// its own, on the shared Redis.
func TestMariaDB(t *testing.T) {
	skipShort(t)
	ca := testenv.NewCA(t)
	start := time.Now()
	db := testenv.StartMariaDB(t, testenv.MariaDBOptions{TLS: ca})
	t.Logf("mariadb-install-db and mariadbd ready in %v", time.Since(start).Round(time.Millisecond))
	tlsName := "dagflow-test-" + testenv.RandomSuffix(8)
	if err := gomysql.RegisterTLSConfig(tlsName, ca.ClientTLS()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gomysql.DeregisterTLSConfig(tlsName) })

	// TLS: a user that must present a client certificate of the CA
	// (REQUIRE X509), connecting with tls=<the registered config>.
	t.Run("TLS", func(t *testing.T) {
		name := db.Database(t)
		db.CreateUser(t, "app_tls", "tls-secret", name, testenv.Grant{Privileges: "ALL PRIVILEGES", RequireX509: true})
		dsn := withTLS(t, db.DSN("app_tls", "tls-secret", name), tlsName)
		if _, err := mysql.Open(context.Background(), mysql.Config{DSN: db.DSN("app_tls", "tls-secret", name)}); err == nil {
			t.Fatal("a connection without TLS was accepted for a user that requires X509")
		}
		st := openStore(t, mysql.Config{DSN: dsn, AutoMigrate: true})
		var cipher string
		if err := st.DB().QueryRow("SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'Ssl_cipher'").Scan(&cipher); err != nil || cipher == "" {
			t.Fatalf("the store's connection is not encrypted: cipher %q, %v", cipher, err)
		}
		runOrders(t, onSharedRedis(t, st))
	})

	// LeastPrivilege: root migrates; the application's user has only
	// SELECT, INSERT, UPDATE and DELETE, and opens the store without
	// AutoMigrate.
	t.Run("LeastPrivilege", func(t *testing.T) {
		name := db.Database(t)
		if err := mysql.Migrate(context.Background(), db.DSN("root", "", name)); err != nil {
			t.Fatalf("migrate as root: %v", err)
		}
		db.CreateUser(t, "app", "app-secret", name, testenv.Grant{Privileges: "SELECT, INSERT, UPDATE, DELETE"})
		st := openStore(t, mysql.Config{DSN: db.DSN("app", "app-secret", name)})
		if _, err := st.DB().Exec("CREATE TABLE probe (id INT)"); err == nil {
			t.Fatal("the application user could create a table; the grant is wider than intended")
		}
		runOrders(t, onSharedRedis(t, st))
	})
}

// withTLS returns dsn with tls=name.
func withTLS(t *testing.T, dsn, name string) string {
	t.Helper()
	c, err := gomysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	c.TLSConfig = name
	return c.FormatDSN()
}

// openStore opens a MySQL store and closes it when the test ends.
func openStore(t *testing.T, cfg mysql.Config) *mysql.Store {
	t.Helper()
	st, err := mysql.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// onSharedRedis returns the setup of st with the shared test Redis and a
// key prefix of the test's own, whose keys are deleted when it ends.
func onSharedRedis(t *testing.T, st *mysql.Store) setup {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testenv.RequireRedis(t)})
	t.Cleanup(func() { c.Close() })
	prefix := testenv.KeyPrefix(t)
	testenv.DeleteKeys(t, c, prefix)
	return setup{store: st, redis: c, prefix: prefix}
}
