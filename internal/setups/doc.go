// Package setups runs the order workflow through the engine against the
// Redis and MySQL setups production uses, each started privately by the
// test on free loopback ports (internal/testenv):
//
//   - a Redis ACL user limited to its key prefix and the commands dagflow
//     needs (TestRedisACL holds the minimal rule set);
//   - a TLS-only Redis with a private CA and a client certificate;
//   - Sentinel (a master, a replica, three Sentinels), as the same ACL
//     user, with the master moved while runs are in flight (a SENTINEL
//     FAILOVER, and a SIGKILL of the master);
//   - a Redis Cluster of 3 masters and 3 replicas, and one of 3 masters
//     as a prefix-limited ACL user (TestRedisClusterACL);
//   - MariaDB over TLS with a private CA;
//   - a MySQL user with only SELECT, INSERT, UPDATE and DELETE, after root
//     applied the migrations.
//
// TestCLI runs the same setups with the built dagflow binary, configured
// only by flags and files (--redis-url-file, --mysql-dsn-file,
// --mysql-tls-*), after dagflow migrate by a privileged user.
//
// The package holds tests only. The servers need the redis-server,
// redis-cli, mariadb-install-db and mariadbd binaries; without them the
// tests skip (fail under CI=true).
package setups
