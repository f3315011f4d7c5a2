package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/dagflow/dagflow/codec"
	"github.com/dagflow/dagflow/codec/aesgcm"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/internal/redisconn"
	"github.com/dagflow/dagflow/persistence"
	"github.com/dagflow/dagflow/persistence/mysql"
)

// Defaults of the connection settings.
const (
	defaultMySQLDSN  = "root@tcp(127.0.0.1:3306)/dagflow"
	defaultRedisAddr = "127.0.0.1:6379"
	defaultPrefix    = "dagflow"
)

// redisURLHelp documents --redis-url in the commands' help.
const redisURLHelp = `Redis URLs (--redis-url, DAGFLOW_REDIS_URL):
  redis://[user:pass@]host[:port][/db]
  rediss://[user:pass@]host[:port][/db][?ca=CA.pem&cert=CERT.pem&key=KEY.pem&server_name=NAME]
  redis+sentinel://[user:pass@]h1:26379,h2:26379/MASTER[/db][?sentinel_user=U&sentinel_password=P]
  redis+cluster://[user:pass@]h1:7000,h2:7001
  rediss+sentinel://..., rediss+cluster://...   the same over TLS, with the TLS parameters
user:pass are the data nodes' AUTH or ACL user (":pass@" for a password alone), percent-encoded.
TLS is 1.2 or later; ca replaces the system's authorities, cert and key are a client certificate.
Also dial_timeout, read_timeout, write_timeout (Go durations). --redis-url-file and
DAGFLOW_REDIS_URL_FILE read the URL from a file, so the password is not on the command line.`

// backendFlags are the connection settings shared by the commands that
// talk to servers. resolve turns the flags, the environment and the
// files into the settings the open methods use.
type backendFlags struct {
	fs *pflag.FlagSet
	// The flags as given.
	mysqlDSN, mysqlDSNFile         string
	mysqlReadDSN, mysqlReadDSNFile string // only the node commands (registerRead)
	mysqlTLSCA, mysqlTLSCert       string
	mysqlTLSKey                    string
	redisURL, redisURLFile, rdAddr string
	prefix, sqlite                 string
	keyringFile                    string
	migrate                        bool
	// logOut receives the logs of the command's engine, in the nodes'
	// format (nodeLogger); set when the command runs.
	logOut io.Writer

	// Resolved settings.
	dsn      string
	readDSN  string // a read replica's DSN, or ""
	mysqlTLS *tls.Config
	redis    *redisconn.Config
	codec    codec.Codec // nil: payloads are stored as they are
}

func (b *backendFlags) register(fs *pflag.FlagSet) {
	b.fs = fs
	fs.StringVar(&b.mysqlDSN, "mysql-dsn", "", "MySQL DSN, user:pass@tcp(host:3306)/db (env DAGFLOW_MYSQL_DSN; default "+defaultMySQLDSN+")")
	fs.StringVar(&b.mysqlDSNFile, "mysql-dsn-file", "", "read the MySQL DSN from this file (env DAGFLOW_MYSQL_DSN_FILE)")
	fs.StringVar(&b.mysqlTLSCA, "mysql-tls-ca", "", "connect to MySQL over TLS, trusting the authorities in this PEM file (env DAGFLOW_MYSQL_TLS_CA)")
	fs.StringVar(&b.mysqlTLSCert, "mysql-tls-cert", "", "client certificate (PEM) for MySQL over TLS, with --mysql-tls-key (env DAGFLOW_MYSQL_TLS_CERT)")
	fs.StringVar(&b.mysqlTLSKey, "mysql-tls-key", "", "the client certificate's key (PEM) (env DAGFLOW_MYSQL_TLS_KEY)")
	fs.StringVar(&b.redisURL, "redis-url", "", "Redis URL, see below (env DAGFLOW_REDIS_URL)")
	fs.StringVar(&b.redisURLFile, "redis-url-file", "", "read the Redis URL from this file (env DAGFLOW_REDIS_URL_FILE)")
	fs.StringVar(&b.rdAddr, "redis-addr", "", "Redis host:port, no credentials or TLS (env DAGFLOW_REDIS_ADDR; default "+defaultRedisAddr+")")
	fs.StringVar(&b.prefix, "prefix", "", "Redis key prefix (env DAGFLOW_PREFIX; default "+defaultPrefix+")")
	fs.StringVar(&b.keyringFile, "codec-keyring-file", "", "encrypt payloads at rest with the AES-256-GCM keys in this file, one key-id=base64 per line, the first current (env DAGFLOW_CODEC_KEYRING_FILE); every node and tool needs the same file")
	fs.BoolVar(&b.migrate, "migrate", false, "apply migrations before starting")
	registerSQLite(fs, &b.sqlite)
}

// setting is one value that a flag, a file flag, a variable or a file
// variable may give.
type setting struct {
	flag, fileFlag string // flag names; fileFlag may be ""
	env, fileEnv   string // variable names; fileEnv may be ""
}

// value returns the setting's value and where it came from ("" and ""
// when nothing gives it). A flag wins over the environment; giving both
// the value and its file in one place is an error.
func (b *backendFlags) value(s setting, flagVal, fileFlagVal string) (val, from string, err error) {
	f := b.fs.Lookup(s.flag).Changed
	ff := s.fileFlag != "" && b.fs.Lookup(s.fileFlag).Changed
	switch {
	case f && ff:
		return "", "", usagef("give --%s or --%s, not both", s.flag, s.fileFlag)
	case f:
		return flagVal, "--" + s.flag, nil
	case ff:
		v, err := readSecretFile(fileFlagVal)
		return v, "--" + s.fileFlag, err
	}
	ev, fv := os.Getenv(s.env), ""
	if s.fileEnv != "" {
		fv = os.Getenv(s.fileEnv)
	}
	switch {
	case ev != "" && fv != "":
		return "", "", fmt.Errorf("both %s and %s are set: unset one", s.env, s.fileEnv)
	case ev != "":
		return ev, s.env, nil
	case fv != "":
		v, err := readSecretFile(fv)
		return v, s.fileEnv, err
	}
	return "", "", nil
}

// readSecretFile reads a value from a file, without surrounding space.
func readSecretFile(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err // names the file
	}
	v := strings.TrimSpace(string(data))
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}

// resolve reads the settings from the flags, the environment and the
// files, parses them and records their passwords in sec. It connects to
// nothing.
func (b *backendFlags) resolve(sec *secrets) error {
	dsn, _, err := b.value(setting{"mysql-dsn", "mysql-dsn-file", "DAGFLOW_MYSQL_DSN", "DAGFLOW_MYSQL_DSN_FILE"}, b.mysqlDSN, b.mysqlDSNFile)
	if err != nil {
		return err
	}
	if dsn == "" {
		dsn = defaultMySQLDSN
	}
	sec.addDSN(dsn)
	b.dsn = dsn
	if err := b.resolveMySQLTLS(); err != nil {
		return err
	}
	if err := b.resolveRedis(sec); err != nil {
		return err
	}
	if b.prefix, _, err = b.value(setting{flag: "prefix", env: "DAGFLOW_PREFIX"}, b.prefix, ""); err != nil {
		return err
	}
	if b.prefix == "" {
		b.prefix = defaultPrefix
	}
	if err := b.resolveCodec(); err != nil {
		return err
	}
	if err := b.resolveSQLite(); err != nil {
		return err
	}
	return b.resolveReadDSN(sec)
}

// resolveCodec reads the payload codec's keyring, if one is given.
func (b *backendFlags) resolveCodec() error {
	path, from, err := b.value(setting{flag: "codec-keyring-file", env: "DAGFLOW_CODEC_KEYRING_FILE"}, b.keyringFile, "")
	if err != nil || path == "" {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	c, err := aesgcm.ParseKeyring(data)
	if err != nil {
		return fmt.Errorf("%s %s: %w", from, path, err)
	}
	b.codec = c
	return nil
}

func (b *backendFlags) resolveMySQLTLS() error {
	var files [3]string
	for i, s := range []struct{ flag, env, val string }{
		{"mysql-tls-ca", "DAGFLOW_MYSQL_TLS_CA", b.mysqlTLSCA},
		{"mysql-tls-cert", "DAGFLOW_MYSQL_TLS_CERT", b.mysqlTLSCert},
		{"mysql-tls-key", "DAGFLOW_MYSQL_TLS_KEY", b.mysqlTLSKey},
	} {
		v, _, err := b.value(setting{flag: s.flag, env: s.env}, s.val, "")
		if err != nil {
			return err
		}
		files[i] = v
	}
	if files == [3]string{} {
		return nil
	}
	t, err := redisconn.LoadTLS(files[0], files[1], files[2], "")
	if err != nil {
		return fmt.Errorf("MySQL %w", err)
	}
	b.mysqlTLS = t
	return nil
}

func (b *backendFlags) resolveRedis(sec *secrets) error {
	u, uFrom, err := b.value(setting{"redis-url", "redis-url-file", "DAGFLOW_REDIS_URL", "DAGFLOW_REDIS_URL_FILE"}, b.redisURL, b.redisURLFile)
	if err != nil {
		return err
	}
	addr, aFrom, err := b.value(setting{flag: "redis-addr", env: "DAGFLOW_REDIS_ADDR"}, b.rdAddr, "")
	if err != nil {
		return err
	}
	switch {
	case u != "" && addr != "" && strings.HasPrefix(uFrom, "--") == strings.HasPrefix(aFrom, "--"):
		return usagef("%s and %s both name the Redis: give one", uFrom, aFrom)
	case u != "" && (addr == "" || strings.HasPrefix(uFrom, "--")):
		c, err := redisconn.Parse(u)
		if err != nil {
			return fmt.Errorf("%s: %w", uFrom, err)
		}
		sec.add(c.Secrets()...)
		b.redis = c
		return nil
	case addr == "":
		addr = defaultRedisAddr
	}
	c, err := redisconn.FromAddr(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", aFrom, err)
	}
	b.redis = c
	return nil
}

// registerRead adds the read replica's flags (a node's: worker, serve).
func (b *backendFlags) registerRead(fs *pflag.FlagSet) {
	fs.StringVar(&b.mysqlReadDSN, "mysql-read-dsn", "", "a read replica of the MySQL database: the API's and the dashboard's reads go there while it keeps up (env DAGFLOW_MYSQL_READ_DSN)")
	fs.StringVar(&b.mysqlReadDSNFile, "mysql-read-dsn-file", "", "read the read replica's DSN from this file (env DAGFLOW_MYSQL_READ_DSN_FILE)")
}

// resolveReadDSN reads the read replica's DSN, on the commands that take
// one.
func (b *backendFlags) resolveReadDSN(sec *secrets) error {
	if b.fs.Lookup("mysql-read-dsn") == nil {
		return nil
	}
	dsn, from, err := b.value(setting{"mysql-read-dsn", "mysql-read-dsn-file", "DAGFLOW_MYSQL_READ_DSN", "DAGFLOW_MYSQL_READ_DSN_FILE"}, b.mysqlReadDSN, b.mysqlReadDSNFile)
	if err != nil || dsn == "" {
		return err
	}
	if b.sqlite != "" {
		return usagef("%s is a MySQL read replica; it cannot go with SQLite", from)
	}
	sec.addDSN(dsn)
	b.readDSN = dsn
	return nil
}

// openReadStore opens the read replica's store, if one is given (nil
// otherwise). It runs no migrations: the engine checks its schema version
// and reads the primary while it is behind.
func (b *backendFlags) openReadStore(ctx context.Context) (persistence.Store, error) {
	if b.readDSN == "" {
		return nil, nil
	}
	st, err := mysql.Open(ctx, mysql.Config{DSN: b.readDSN, TLS: b.mysqlTLS})
	if err != nil {
		return nil, fmt.Errorf("read replica: %w (DSN %s)", err, redactDSN(b.readDSN))
	}
	return st, nil
}

// openStore opens the MySQL store (or the SQLite file of --sqlite).
func (b *backendFlags) openStore(ctx context.Context) (persistence.Store, error) {
	if b.sqlite != "" {
		return openSQLite(ctx, b.sqlite, b.migrate)
	}
	st, err := mysql.Open(ctx, mysql.Config{DSN: b.dsn, AutoMigrate: b.migrate, TLS: b.mysqlTLS})
	if err != nil {
		return nil, fmt.Errorf("%w (DSN %s)%s", err, redactDSN(b.dsn), unknownDatabaseHint(err, b.dsn))
	}
	return st, nil
}

// erUnknownDatabase is MySQL's error number for a database the server
// does not have.
const erUnknownDatabase = 1049

// unknownDatabaseHint says, after an error opening the store, how to
// make the DSN's database when the server does not have it; "" for
// other errors.
func unknownDatabaseHint(err error, dsn string) string {
	var me *mysqldriver.MySQLError
	if !errors.As(err, &me) || me.Number != erUnknownDatabase {
		return ""
	}
	name := "DATABASE"
	if c, perr := mysqldriver.ParseDSN(dsn); perr == nil && c.DBName != "" {
		name = c.DBName
	}
	return fmt.Sprintf(": create it with CREATE DATABASE `%s` (then dagflow migrate), "+
		"or use an SQLite file instead with --sqlite FILE", strings.ReplaceAll(name, "`", "``"))
}

// checkSchema refuses a database behind this binary's migrations (an
// empty one included) before anything reads its tables, saying to run
// dagflow migrate. The engine checks again when it starts.
func checkSchema(ctx context.Context, st persistence.Store) error {
	v, err := st.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	return v.Check()
}

// openRedis connects to the Redis and checks the credentials: a wrong
// password, a missing permission or a TLS failure is an error here, naming
// the server and the user.
func (b *backendFlags) openRedis(ctx context.Context) (redis.UniversalClient, error) {
	return redisconn.Open(ctx, b.redis)
}

// inspector opens the store and an engine that is never started: it runs
// nothing and, unless dial, connects to Redis only when an operation
// needs it (with dial, the Redis and its credentials are checked first,
// for commands that write to it). Through it the commands see payloads
// decoded by the codec and why steps wait. The caller closes what close
// closes.
func (b *backendFlags) inspector(ctx context.Context, dial bool) (e *engine.Engine, close func(), err error) {
	st, err := b.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	var rdb redis.UniversalClient
	if dial {
		rdb, err = b.openRedis(ctx)
	} else {
		rdb, err = b.redis.Client()
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	if err := checkSchema(ctx, st); err != nil {
		rdb.Close()
		st.Close()
		return nil, nil, err
	}
	cfg := engine.Config{Store: st, Redis: rdb, Prefix: b.prefix, NoWorkers: true, ReconcileInterval: -1, Codec: b.codec}
	if b.logOut != nil {
		cfg.Logger = nodeLogger(b.logOut, slog.LevelInfo, nil)
	}
	e, err = engine.New(cfg)
	if err != nil {
		rdb.Close()
		st.Close()
		return nil, nil, err
	}
	return e, func() { e.Stop(context.Background()); rdb.Close(); st.Close() }, nil
}
