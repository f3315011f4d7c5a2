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

	"github.com/dagflow/dagflow/internal/secretmask"
)

// redactedText replaces a password in what the command prints.
const redactedText = "xxxxx"

// minSecret is the shortest password the writers replace wherever it
// appears; a shorter one would mangle ordinary text (it is still removed
// from every DSN and URL, by its place in them).
const minSecret = 3

// secrets are the passwords the command was given; its writers replace
// them (where they are not part of a longer word, see package
// secretmask), and the user-info of any URL or DSN, in everything
// printed.
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
	} else if _, pass, _, ok := dsnUserinfo(dsn); ok {
		s.add(pass)
	}
}

// redact removes the passwords from text.
func (s *secrets) redact(text string) string {
	text = redactPatterns(text)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, p := range s.list {
		text = secretmask.Replace(text, p, redactedText)
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
// valid DSN; user:password written without the '@' that should end it
// ("root:pw/db") loses its password too.
func redactDSN(dsn string) string {
	if user, _, end, ok := dsnUserinfo(dsn); ok {
		return user + ":" + redactedText + dsn[end:]
	}
	return dsn
}

// dsnUserinfo finds user:password in a DSN the driver cannot parse, the
// way the driver does: before the last '@' before the last '/'. Without
// such an '@', what comes before the last '/' is taken for user:password
// when it has a ':' that no '(' precedes ("root:pw/db"; not
// "tcp(db:3306)/db"). end is the index where the password ends; ok is
// false when the DSN has no password.
func dsnUserinfo(dsn string) (user, pass string, end int, ok bool) {
	head := dsn
	if slash := strings.LastIndex(dsn, "/"); slash >= 0 {
		head = dsn[:slash]
	}
	end = strings.LastIndex(head, "@")
	if end < 0 {
		colon := strings.IndexByte(head, ':')
		if colon < 0 || strings.ContainsRune(head[:colon], '(') {
			return "", "", 0, false
		}
		end = len(head)
	}
	user, pass, ok = strings.Cut(dsn[:end], ":")
	return user, pass, end, ok
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
