package sqlstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dagflow/dagflow/internal/jsoncheck"
	"github.com/dagflow/dagflow/internal/names"
	"github.com/dagflow/dagflow/persistence"
)

// Limits on values the store accepts. Names are ASCII so that every index
// over them stays small and collation-free.
const (
	// MaxNameLen is the longest workflow, step, queue or schedule name.
	MaxNameLen = names.MaxLen
	// MaxIDLen is the longest run id.
	MaxIDLen = 64
	// MaxKeyLen is the longest idempotency key, in bytes.
	MaxKeyLen = 255
	// MaxFenceLen is the longest fence token, in bytes.
	MaxFenceLen = 128
	// MaxWorkerLen is the longest worker id, in bytes.
	MaxWorkerLen = 255
	// MaxErrorLen is how much of an error message is kept, in bytes;
	// longer messages are truncated (a failure is never refused because
	// its message is long).
	MaxErrorLen = 64 << 10
	// MaxSpecLen is the longest cron spec or time zone name.
	MaxSpecLen = 255
	// DefaultMaxPayload is the default limit on inputs, outputs and
	// metadata.
	DefaultMaxPayload = 1 << 20
	// MaxDueWorkflows is the most workflows one reconciler listing
	// (ListDueParams.Workflows) may name: each costs a query per status.
	MaxDueWorkflows = 1000
	// DefaultQueue is the queue of a step created without one.
	DefaultQueue = "default"
	// MaxDefinitionVersionLen is the longest definition version (a
	// content hash), in bytes.
	MaxDefinitionVersionLen = 64
	// MaxAPIKeyNameLen is the longest API key name, in bytes.
	MaxAPIKeyNameLen = 100
	// APIKeyHashLen is the length of an API key's hash (SHA-256).
	APIKeyHashLen = 32
	// MaxAPIKeyHintLen is the longest API key hint, in bytes.
	MaxAPIKeyHintLen = 16
)

// isID reports whether v matches ^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$ (run
// ids). A byte loop, not a regexp: the check runs for every item of every
// batch, on the hot path.
func isID(v string) bool {
	if len(v) == 0 || len(v) > 64 || (!isLetter(v[0]) && !isDigit(v[0])) {
		return false
	}
	for i := 1; i < len(v); i++ {
		if c := v[i]; !isLetter(c) && !isDigit(c) && c != '_' && c != '.' && c != ':' && c != '-' {
			return false
		}
	}
	return true
}

// isDefinitionVersion reports whether v is 1-64 characters of
// [a-z0-9:_-] (a definition version: a content hash, lowercase hex for
// the engine's).
func isDefinitionVersion(v string) bool {
	if len(v) == 0 || len(v) > MaxDefinitionVersionLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !(c >= 'a' && c <= 'z') && !isDigit(c) && c != ':' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isAPIKeyName reports whether v is 1-100 characters of [A-Za-z0-9._-].
func isAPIKeyName(v string) bool {
	if len(v) == 0 || len(v) > MaxAPIKeyNameLen {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; !isLetter(c) && !isDigit(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

func invalid(field, value, reason string) error {
	if len(value) > 80 {
		value = value[:80] + "..."
	}
	return &persistence.ValidationError{Field: field, Value: value, Reason: reason}
}

func validName(field, v string) error {
	if !names.Valid(v) {
		return invalid(field, v, "must match "+names.Pattern)
	}
	return nil
}

func validRunID(v string) error {
	if !isID(v) {
		return invalid("run id", v, "must be 1-64 characters of [A-Za-z0-9_.:-] starting with a letter or digit")
	}
	return nil
}

func validDefinitionVersion(v string) error {
	if !isDefinitionVersion(v) {
		return invalid("definition version", v, "must be 1-64 characters of [a-z0-9:_-]")
	}
	return nil
}

// validKey checks an idempotency key: 1-255 bytes of valid UTF-8 without
// NUL. Any other byte sequence, quotes and backslashes included, is stored
// and compared byte-exact.
func validKey(v string) error {
	switch {
	case len(v) > MaxKeyLen:
		return invalid("idempotency key", v, "longer than 255 bytes")
	case !utf8.ValidString(v):
		return invalid("idempotency key", v, "not valid UTF-8")
	case strings.IndexByte(v, 0) >= 0:
		return invalid("idempotency key", v, "contains a NUL byte")
	}
	return nil
}

// validPriority checks a run's priority against
// persistence.MinPriority..MaxPriority.
func validPriority(p int) error {
	if p < persistence.MinPriority || p > persistence.MaxPriority {
		return invalid("priority", strconv.Itoa(p), fmt.Sprintf("not in %d..%d", persistence.MinPriority, persistence.MaxPriority))
	}
	return nil
}

func validToken(field, v string, maxLen int) error {
	switch {
	case v == "":
		return invalid(field, v, "is empty")
	case len(v) > maxLen:
		return invalid(field, v, "too long")
	case !utf8.ValidString(v) || strings.IndexByte(v, 0) >= 0:
		return invalid(field, v, "must be valid UTF-8 without NUL")
	}
	return nil
}

// validNodeToken checks a node id, a worker or a lease holder: as
// validToken, and without white space at either end. MySQL compares these
// columns with trailing spaces ignored (a PAD SPACE collation, and a
// primary key of node ids), so two storable ones must never differ by
// trailing spaces alone; the rule is symmetric so that it reads as one.
func validNodeToken(field, v string, maxLen int) error {
	if err := validToken(field, v, maxLen); err != nil {
		return err
	}
	first, _ := utf8.DecodeRuneInString(v)
	last, _ := utf8.DecodeLastRuneInString(v)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return invalid(field, v, "must not begin or end with white space")
	}
	return nil
}

// validJSON checks a JSON payload against the size limit; nil (or empty)
// means no value.
func (s *Store) validJSON(field string, b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if len(b) > s.maxPayload {
		return &persistence.LimitError{Field: field, Size: len(b), Limit: s.maxPayload}
	}
	if err := jsoncheck.Check(b); err != nil {
		return invalid(field, string(b), err.Error())
	}
	return nil
}

// cleanText makes an error or reason message storable: invalid UTF-8
// sequences become U+FFFD (a utf8mb4 column refuses them) and the text is
// cut to at most MaxErrorLen bytes. Everything else, NUL bytes included,
// is stored as is.
func cleanText(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) > MaxErrorLen {
		cut := MaxErrorLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// norm is how times are stored: UTC, microseconds. A zero time means now.
func norm(t time.Time) time.Time {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Truncate(time.Microsecond)
}

func normPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := norm(*t)
	return &v
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func clampLimit(n, def, max int) int {
	if n <= 0 {
		return def
	}
	if n > max {
		return max
	}
	return n
}

// Lookups by an id or name that could never have been stored find
// nothing without asking the database (whose ASCII key columns would
// refuse to compare with other characters).

func runRef(id string) error {
	if !isID(id) {
		return fmt.Errorf("%w: %q", persistence.ErrRunNotFound, id)
	}
	return nil
}

func stepRef(runID, step string) error {
	if !isID(runID) || !names.Valid(step) {
		return fmt.Errorf("%w: run %q step %q", persistence.ErrStepNotFound, runID, step)
	}
	return nil
}

func definitionRef(workflow, version string) error {
	if !names.Valid(workflow) || !isDefinitionVersion(version) {
		return fmt.Errorf("%w: workflow %q version %q", persistence.ErrDefinitionNotFound, workflow, version)
	}
	return nil
}

func scheduleRef(name string) error {
	if !names.Valid(name) {
		return fmt.Errorf("%w: %q", persistence.ErrScheduleNotFound, name)
	}
	return nil
}

// storableNames keeps the names that can exist.
func storableNames(list []string) []string {
	out := make([]string, 0, len(list))
	for _, n := range list {
		if names.Valid(n) {
			out = append(out, n)
		}
	}
	return out
}
