// Package jsoncheck is the one rule for whether a payload is JSON: valid
// JSON within the nesting depth the standard library's decoder allows, and
// when it is not, which of the two is wrong.
package jsoncheck

import (
	"encoding/json"
	"errors"
	"fmt"
)

// MaxDepth is how deeply arrays and objects may nest: encoding/json's
// limit, past which it cannot decode a value (and json.Valid says false).
const MaxDepth = 10000

// ErrInvalid is the reason given for a payload that is not JSON.
var ErrInvalid = errors.New("not valid JSON")

// ErrTooDeep is the reason given for a payload nested past MaxDepth.
var ErrTooDeep = fmt.Errorf("too deeply nested (limit %d)", MaxDepth)

// Check returns nil for valid JSON, ErrTooDeep for a payload whose arrays
// and objects nest past MaxDepth (whatever else is wrong with it: the
// decoder gives up there), and ErrInvalid for anything else. The depth is
// only measured for a payload json.Valid refuses.
func Check(b []byte) error {
	if json.Valid(b) {
		return nil
	}
	if depth(b) > MaxDepth {
		return ErrTooDeep
	}
	return ErrInvalid
}

// depth is the deepest nesting of arrays and objects in b, brackets in
// strings not counted, and stopping early once it passes MaxDepth.
func depth(b []byte) int {
	d, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			d++
			if d > deepest {
				deepest = d
				if deepest > MaxDepth {
					return deepest
				}
			}
		case c == ']' || c == '}':
			d--
		}
	}
	return deepest
}
