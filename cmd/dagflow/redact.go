package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// redactedText replaces a password in what the command prints.
const redactedText = "xxxxx"

// minSecret is the shortest password the writers replace wherever it
// appears; a shorter one would mangle ordinary text (it is still removed
// from every DSN and URL, by its place in them).
const minSecret = 3

// secrets are the passwords the command was given; its writers replace
// them, and the user-info of any URL or DSN, in everything printed.
type secrets struct {
	mu   sync.RWMutex
	list []string
}

// add records passwords to hide.
func (s *secrets) add(pass ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range pass {
		if len(p) >= minSecret {
			s.list = append(s.list, p)
		}
	}
}

// addDSN records the password of a MySQL DSN.
func (s *secrets) addDSN(dsn string) {
	if c, err := mysql.ParseDSN(dsn); err == nil {
		s.add(c.Passwd)
	} else if _, pass, ok := dsnUserinfo(dsn); ok {
		s.add(pass)
	}
}

// redact removes the passwords from text.
func (s *secrets) redact(text string) string {
	text = redactPatterns(text)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.list {
		text = strings.ReplaceAll(text, p, redactedText)
	}
	return text
}

// writer wraps w so that what is written to it is redacted. Each Write is
// redacted whole: the command and slog write a message in one call.
func (s *secrets) writer(w io.Writer) io.Writer { return &redactWriter{w: w, s: s} }

type redactWriter struct {
	w io.Writer
	s *secrets
}

func (r *redactWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(r.w, r.s.redact(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

var (
	// scheme://user:password@ in URLs.
	urlUserinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://[^:@/\s]*):[^@\s]*@`)
	// user:password@tcp( and the like in go-sql-driver DSNs.
	dsnPassword = regexp.MustCompile(`([^\s:@/"'(]*):[^\s@]*@(tcp|tcp6|unix|udp)?\(`)
)

// redactPatterns removes what looks like a password by its place in a URL
// or a DSN.
func redactPatterns(text string) string {
	text = urlUserinfo.ReplaceAllString(text, "${1}:"+redactedText+"@")
	return dsnPassword.ReplaceAllString(text, "${1}:"+redactedText+"@${2}(")
}

// redactDSN returns a MySQL DSN, as written, without its password, for
// messages. It finds the user-info as the driver does, so it needs no
// valid DSN.
func redactDSN(dsn string) string {
	if end := dsnUserinfoEnd(dsn); end >= 0 {
		if user, _, hasPass := strings.Cut(dsn[:end], ":"); hasPass {
			return user + ":" + redactedText + dsn[end:]
		}
	}
	return dsn
}

// dsnUserinfo finds user:password in a DSN the driver cannot parse, the
// way the driver does: the last '@' before the last '/'.
func dsnUserinfo(dsn string) (user, pass string, ok bool) {
	end := dsnUserinfoEnd(dsn)
	if end < 0 {
		return "", "", false
	}
	user, pass, _ = strings.Cut(dsn[:end], ":")
	return user, pass, true
}

// dsnUserinfoEnd is the index of the '@' that ends a DSN's user-info, or -1.
func dsnUserinfoEnd(dsn string) int {
	head := dsn
	if slash := strings.LastIndex(dsn, "/"); slash >= 0 {
		head = dsn[:slash]
	}
	return strings.LastIndex(head, "@")
}

// driverLogOut is where the drivers' loggers write: the redacting stderr
// of the latest run. The drivers' loggers are process-wide and set once;
// run only swaps the writer, so no driver goroutine reads a logger
// variable while it is being set.
var (
	driverLogOut  atomic.Pointer[io.Writer]
	driverLogOnce sync.Once
)

// routeDriverLogs sends the Redis and MySQL drivers' own logs (go-redis's
// pool errors, the MySQL driver's connection errors) to w, a redacting
// writer, instead of their default loggers on the process's stderr.
func routeDriverLogs(w io.Writer) {
	driverLogOut.Store(&w)
	driverLogOnce.Do(func() {
		redis.SetLogger(driverLogger{prefix: "redis: "})
		mysql.SetLogger(driverLogger{prefix: "mysql: "})
	})
}

// driverLogger is go-redis's and the MySQL driver's logger interface. It
// writes to w, or when w is nil to driverLogOut.
type driverLogger struct {
	w      io.Writer
	prefix string
}

// Printf is go-redis's.
func (l driverLogger) Printf(_ context.Context, format string, v ...any) {
	l.line(fmt.Sprintf(format, v...))
}

// Print is the MySQL driver's.
func (l driverLogger) Print(v ...any) { l.line(fmt.Sprint(v...)) }

func (l driverLogger) line(msg string) {
	w := l.w
	if w == nil {
		p := driverLogOut.Load()
		if p == nil {
			return
		}
		w = *p
	}
	msg = strings.TrimPrefix(strings.TrimRight(msg, "\n"), l.prefix)
	io.WriteString(w, l.prefix+escapeLine(msg)+"\n")
}
