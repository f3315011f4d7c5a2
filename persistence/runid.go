package persistence

import "strings"

// MinRunIDPrefix is the fewest characters of a run id prefix that
// RunResolve accepts: shorter, too many runs would share it.
const MinRunIDPrefix = 8

// MaxRunIDLen is the longest run id, in bytes.
const MaxRunIDLen = 64

// RunIDPrefix normalises a run id prefix as an operator types it to the
// form run ids are stored in: a prefix of a UUID (only hex digits and
// dashes) is lowercased and, typed without dashes, gets them back at the
// UUID's positions (after hex digits 8, 12, 16 and 20), so
// "0190A1B2C3D4" and "0190a1b2-c3d4" name the same runs. Any other
// prefix of a run id is kept as it is. A prefix shorter than
// MinRunIDPrefix, or with a character no run id has, gives a
// *ValidationError (Is ErrInvalid) that says so.
func RunIDPrefix(prefix string) (string, error) {
	if len(prefix) > MaxRunIDLen {
		return "", &ValidationError{Field: "run id prefix", Value: prefix[:MaxRunIDLen] + "...", Reason: "longer than a run id"}
	}
	hexOnly := true
	for i := 0; i < len(prefix); i++ {
		c := prefix[i]
		if !idByte(c) || i == 0 && (c == '_' || c == '.' || c == ':' || c == '-') {
			return "", &ValidationError{Field: "run id prefix", Value: prefix,
				Reason: "a run id has only letters, digits, '-', '_', '.' and ':', and starts with a letter or digit"}
		}
		hexOnly = hexOnly && (isHex(c) || c == '-')
	}
	if len(prefix) < MinRunIDPrefix {
		return "", &ValidationError{Field: "run id prefix", Value: prefix, Reason: "a run id prefix needs at least 8 characters"}
	}
	if !hexOnly {
		return prefix, nil
	}
	prefix = strings.ToLower(prefix)
	if strings.Contains(prefix, "-") || len(prefix) > 32 {
		return prefix, nil
	}
	var b strings.Builder
	for i := 0; i < len(prefix); i++ {
		if i == 8 || i == 12 || i == 16 || i == 20 {
			b.WriteByte('-')
		}
		b.WriteByte(prefix[i])
	}
	return b.String(), nil
}

// IsCanonicalRunID reports whether id is a run id as the engine makes
// them: a UUID in its lowercase 36-character form.
func IsCanonicalRunID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isHex(c) || c >= 'A' && c <= 'F' {
				return false
			}
		}
	}
	return true
}

func idByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':'
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
