package names

// MaxLen is the longest name, in bytes.
const MaxLen = 64

// Pattern is the rule as a regular expression, for messages and docs.
const Pattern = `^[A-Za-z][A-Za-z0-9_-]{0,63}$`

// Rule is the rule in words, for messages: "want " + Rule.
const Rule = "a letter followed by up to 63 letters, digits, '_' or '-'"

// Valid reports whether s matches [Pattern]. It is a byte loop, not a
// regexp: the stores check every name of every batch item, on the hot
// path (the measurement is in docs/benchmarks.md).
func Valid(s string) bool {
	if len(s) == 0 || len(s) > MaxLen || !letter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !letter(c) && !digit(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func letter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }
func digit(c byte) bool  { return c >= '0' && c <= '9' }

// MaxEventLen is the longest event name, in bytes.
const MaxEventLen = 128

// EventPattern is the rule of event names as a regular expression: dotted
// names such as "order.placed" ('.' separates the words; events are not
// Redis keys, so the separator is free).
const EventPattern = `^[A-Za-z][A-Za-z0-9_.-]{0,127}$`

// EventRule is the event name rule in words, for messages: "want " +
// EventRule.
const EventRule = "a letter followed by up to 127 letters, digits, '_', '-' or '.'"

// ValidEvent reports whether s matches [EventPattern].
func ValidEvent(s string) bool {
	if len(s) == 0 || len(s) > MaxEventLen || !letter(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !letter(c) && !digit(c) && c != '_' && c != '-' && c != '.' {
			return false
		}
	}
	return true
}
