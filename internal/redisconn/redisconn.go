package redisconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dagflow/dagflow/internal/secretmask"
)

// Mode is the kind of deployment a URL names.
type Mode int

// The modes of Config.Mode.
const (
	Single Mode = iota
	Sentinel
	Cluster
)

// TLSFiles are the TLS parameters of a rediss URL.
type TLSFiles struct {
	// CA is a PEM file of the authorities to trust (default: the system's).
	CA string
	// Cert and Key are the client certificate and its key, both or neither.
	Cert, Key string
	// ServerName is the name the server's certificate must hold (default:
	// the host dialled).
	ServerName string
}

// Config is a parsed Redis URL.
type Config struct {
	Mode Mode
	// Addrs are the servers: one for Single, the sentinels for Sentinel,
	// the seed nodes for Cluster.
	Addrs []string
	// MasterName is the Sentinel master's name.
	MasterName string
	// Username and Password authenticate to the data nodes.
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the sentinels.
	SentinelUsername, SentinelPassword string
	// DB is the database number (not for Cluster).
	DB int
	// TLS, when not nil, makes every connection use TLS.
	TLS *TLSFiles
	// DialTimeout, ReadTimeout and WriteTimeout are go-redis's (zero: its
	// defaults).
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
}

const redacted = "xxxxx"

var schemes = map[string]struct {
	mode Mode
	tls  bool
}{
	"redis":           {Single, false},
	"rediss":          {Single, true},
	"redis+sentinel":  {Sentinel, false},
	"rediss+sentinel": {Sentinel, true},
	"redis+cluster":   {Cluster, false},
	"rediss+cluster":  {Cluster, true},
}

// Parse reads a Redis URL (see the package doc for the forms). Its errors
// quote the URL with its passwords redacted.
func Parse(raw string) (*Config, error) {
	c, err := parse(raw)
	if err != nil {
		return nil, fmt.Errorf("redis URL %q: %w", Redact(raw), err)
	}
	return c, nil
}

// FromAddr is the Config of a single server at host:port without
// credentials or TLS (the --redis-addr flag).
func FromAddr(addr string) (*Config, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("redis address %q: want host:port", addr)
	}
	return &Config{Mode: Single, Addrs: []string{addr}}, nil
}

func parse(raw string) (*Config, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("want scheme://host..., e.g. redis://host:6379/0")
	}
	s, ok := schemes[strings.ToLower(scheme)]
	if !ok {
		return nil, fmt.Errorf("unknown scheme %q (redis, rediss, redis+sentinel, rediss+sentinel, redis+cluster, rediss+cluster)", scheme)
	}
	c := &Config{Mode: s.mode}
	rest, query, _ := strings.Cut(rest, "?")
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		user, pass, err := userinfo(rest[:at])
		if err != nil {
			return nil, err
		}
		c.Username, c.Password = user, pass
		rest = rest[at+1:]
	}
	authority, path, _ := strings.Cut(rest, "/")
	if err := c.hosts(authority); err != nil {
		return nil, err
	}
	if err := c.path(path); err != nil {
		return nil, err
	}
	if err := c.params(query, s.tls); err != nil {
		return nil, err
	}
	return c, nil
}

func userinfo(s string) (user, pass string, err error) {
	u, p, hasPass := strings.Cut(s, ":")
	if user, err = url.PathUnescape(u); err != nil {
		return "", "", errors.New("bad percent-encoding in the user name")
	}
	if pass, err = url.PathUnescape(p); err != nil {
		return "", "", errors.New("bad percent-encoding in the password")
	}
	if hasPass && pass == "" {
		return "", "", errors.New("empty password after ':' (leave out the ':' for none)")
	}
	return user, pass, nil
}

func (c *Config) hosts(authority string) error {
	if authority == "" {
		return errors.New("no host")
	}
	hosts := strings.Split(authority, ",")
	if c.Mode == Single && len(hosts) > 1 {
		return errors.New("several hosts: use redis+sentinel:// or redis+cluster://")
	}
	port := "6379"
	if c.Mode == Sentinel {
		port = "26379"
	}
	for _, h := range hosts {
		addr, err := hostPort(h, port)
		if err != nil {
			return err
		}
		c.Addrs = append(c.Addrs, addr)
	}
	return nil
}

func hostPort(h, defPort string) (string, error) {
	if h == "" {
		return "", errors.New("empty host in the host list")
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		// No port (or an IPv6 address in brackets without one).
		host, port = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"), defPort
		if strings.ContainsAny(host, "[]") || (strings.Contains(host, ":") && !strings.HasPrefix(h, "[")) {
			return "", fmt.Errorf("bad host %q (an IPv6 address goes in brackets: [::1]:6379)", h)
		}
	}
	if host == "" {
		return "", fmt.Errorf("host %q has no name", h)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("host %q: port %q is not a number in 1..65535", h, port)
	}
	return net.JoinHostPort(host, port), nil
}

func (c *Config) path(p string) error {
	parts := strings.Split(p, "/")
	if p == "" {
		parts = nil
	}
	if c.Mode == Sentinel {
		if len(parts) == 0 || parts[0] == "" {
			return errors.New("no master name: want redis+sentinel://host:26379/MASTER[/db]")
		}
		c.MasterName, parts = parts[0], parts[1:]
	}
	switch {
	case len(parts) == 0 || (len(parts) == 1 && parts[0] == ""):
		return nil
	case len(parts) > 1:
		return fmt.Errorf("path %q: want at most a database number", "/"+p)
	case c.Mode == Cluster:
		return fmt.Errorf("path %q: a cluster has no database number", "/"+p)
	}
	db, err := strconv.Atoi(parts[0])
	if err != nil || db < 0 {
		return fmt.Errorf("database %q is not a number", parts[0])
	}
	c.DB = db
	return nil
}

func (c *Config) params(query string, useTLS bool) error {
	q, err := url.ParseQuery(query)
	if err != nil {
		return errors.New("bad query string")
	}
	if useTLS {
		c.TLS = &TLSFiles{}
	}
	for name, vals := range q {
		if len(vals) != 1 || vals[0] == "" {
			return fmt.Errorf("parameter %q wants exactly one non-empty value", name)
		}
		if err := c.param(name, vals[0]); err != nil {
			return err
		}
	}
	if c.TLS != nil && (c.TLS.Cert == "") != (c.TLS.Key == "") {
		return errors.New("cert and key go together: give both or neither")
	}
	return nil
}

func (c *Config) param(name, v string) error {
	switch name {
	case "ca", "cert", "key", "server_name":
		if c.TLS == nil {
			return fmt.Errorf("parameter %q needs TLS: use a rediss scheme", name)
		}
		*map[string]*string{"ca": &c.TLS.CA, "cert": &c.TLS.Cert, "key": &c.TLS.Key, "server_name": &c.TLS.ServerName}[name] = v
	case "sentinel_user", "sentinel_password":
		if c.Mode != Sentinel {
			return fmt.Errorf("parameter %q is for redis+sentinel URLs", name)
		}
		if name == "sentinel_user" {
			c.SentinelUsername = v
		} else {
			c.SentinelPassword = v
		}
	case "dial_timeout", "read_timeout", "write_timeout":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("parameter %s=%q is not a positive duration (like 5s)", name, v)
		}
		*map[string]*time.Duration{"dial_timeout": &c.DialTimeout, "read_timeout": &c.ReadTimeout, "write_timeout": &c.WriteTimeout}[name] = d
	default:
		return fmt.Errorf("unknown parameter %q (ca, cert, key, server_name, sentinel_user, sentinel_password, dial_timeout, read_timeout, write_timeout)", name)
	}
	return nil
}

// String describes c for messages, without passwords:
// "rediss://app@h1:6379/0".
func (c *Config) String() string {
	s := [...]string{"redis", "redis+sentinel", "redis+cluster"}[c.Mode]
	if c.TLS != nil {
		s = "rediss" + strings.TrimPrefix(s, "redis")
	}
	s += "://"
	if c.Username != "" {
		s += url.PathEscape(c.Username) + "@"
	}
	s += strings.Join(c.Addrs, ",")
	if c.MasterName != "" {
		s += "/" + c.MasterName
	}
	if c.Mode != Cluster {
		s += "/" + strconv.Itoa(c.DB)
	}
	return s
}

// Secrets are the passwords in c, for a logger to redact.
func (c *Config) Secrets() []string {
	var s []string
	for _, p := range []string{c.Password, c.SentinelPassword} {
		if p != "" {
			s = append(s, p)
		}
	}
	return s
}

// TLSConfig loads the TLS files of c; nil when c does not use TLS.
func (c *Config) TLSConfig() (*tls.Config, error) {
	if c.TLS == nil {
		return nil, nil
	}
	return LoadTLS(c.TLS.CA, c.TLS.Cert, c.TLS.Key, c.TLS.ServerName)
}

// LoadTLS builds a client TLS configuration (TLS 1.2 or later) trusting the
// authorities in the PEM file ca (the system's when empty), presenting the
// client certificate in cert and key when given, and verifying the server
// as serverName when not empty. Errors name the file.
func LoadTLS(ca, cert, key, serverName string) (*tls.Config, error) {
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("TLS CA file: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA file %s holds no PEM certificate", ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("TLS client certificate and key go together: give both or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate %s / key %s: %w", cert, key, err)
		}
		t.Certificates = []tls.Certificate{pair}
	}
	return t, nil
}

// Client makes the go-redis client of c, without connecting.
func (c *Config) Client() (redis.UniversalClient, error) {
	t, err := c.TLSConfig()
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", c, err)
	}
	switch c.Mode {
	case Sentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: c.MasterName, SentinelAddrs: c.Addrs,
			SentinelUsername: c.SentinelUsername, SentinelPassword: c.SentinelPassword,
			Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: t,
			DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
		}), nil
	case Cluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Addrs, Username: c.Username, Password: c.Password, TLSConfig: t,
			DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
		}), nil
	}
	return redis.NewClient(&redis.Options{
		Addr: c.Addrs[0], Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: t,
		DialTimeout: c.DialTimeout, ReadTimeout: c.ReadTimeout, WriteTimeout: c.WriteTimeout,
	}), nil
}

// Open makes the client of c and pings it, so that a wrong password, a
// missing permission or a TLS failure is found at start-up. The error
// names the servers and the user, never the password:
// "redis 10.0.0.1:6379 (user app): authentication failed: WRONGPASS ...".
func Open(ctx context.Context, c *Config) (redis.UniversalClient, error) {
	client, err := c.Client()
	if err != nil {
		return nil, err
	}
	if err := client.Ping(ctx).Err(); err != nil {
		client.Close()
		if c.Mode == Sentinel && (errors.Is(err, redis.Nil) || strings.HasSuffix(err.Error(), redis.Nil.Error())) {
			if ue := c.unknownMaster(ctx); ue != nil {
				return nil, ue
			}
		}
		return nil, c.describe(err)
	}
	return client, nil
}

// describe turns a ping's error into one that says what failed.
func (c *Config) describe(err error) error {
	who := "redis " + strings.Join(c.Addrs, ",")
	if c.MasterName != "" {
		who += " master " + c.MasterName
	}
	user := c.Username
	if user == "" {
		user = "default"
	}
	if c.Mode == Sentinel {
		suser := c.SentinelUsername
		if suser == "" {
			suser = "default"
		}
		user += ", sentinel user " + suser
	}
	who += " (user " + user + ")"
	raw := err.Error()
	msg := raw
	for _, s := range c.Secrets() {
		msg = secretmask.Replace(msg, s, redacted)
	}
	// The error is classified by go-redis's own text: the redacted one
	// may have lost a word to a password.
	var what string
	switch msg := raw; {
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"),
		strings.Contains(msg, "invalid password"), strings.Contains(msg, "AUTH <password> called without any password"),
		strings.Contains(msg, "invalid username-password pair"):
		what = "authentication failed"
	case strings.HasPrefix(msg, "NOPERM"):
		what = "permission denied"
	case strings.Contains(msg, "x509:"), strings.Contains(msg, "tls:"), strings.Contains(msg, "first record does not look like a TLS handshake"):
		what = "TLS failed"
	default:
		what = "unreachable"
	}
	return &Error{Server: who, What: what, Msg: msg, Err: err}
}

// Error is a failed connection check: Server names the servers and the
// user, Msg is the cause with every password of the URL redacted.
type Error struct {
	Server, What, Msg string
	Err               error
}

func (e *Error) Error() string { return e.Server + ": " + e.What + ": " + e.Msg }

// Unwrap returns go-redis's error (which may hold a password: print Error).
func (e *Error) Unwrap() error { return e.Err }

// Redact returns raw, a Redis URL, with the password of its user-info and
// its sentinel_password parameter replaced by "xxxxx". It does not need a
// valid URL: whatever looks like user:password@ before the hosts is
// redacted.
func Redact(raw string) string {
	prefix, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		prefix, rest = raw[:i+3], raw[i+3:]
	}
	head, tail := rest, ""
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		head, tail = rest[:q], rest[q:]
	}
	if at := strings.LastIndex(head, "@"); at >= 0 {
		if user, _, hasPass := strings.Cut(head[:at], ":"); hasPass {
			head = user + ":" + redacted + head[at:]
		}
	}
	if query, ok := strings.CutPrefix(tail, "?"); ok {
		var kept []string
		for _, kv := range strings.Split(query, "&") {
			if k, _, _ := strings.Cut(kv, "="); k == "sentinel_password" {
				kv = k + "=" + redacted
			}
			kept = append(kept, kv)
		}
		tail = "?" + strings.Join(kept, "&")
	}
	return prefix + head + tail
}
