package mysql

import (
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestRetryableErrors: the errors after which a transaction is redone
// are MySQL's deadlock and lock wait timeout and TiDB's write conflict,
// schema change, retry failure and busy or unavailable servers, also
// when wrapped; the others (a duplicate key, a syntax error, a TiDB
// error not about retrying) are not.
func TestRetryableErrors(t *testing.T) {
	for _, tc := range []struct {
		number uint16
		want   bool
	}{
		{1213, true}, {1205, true},
		{9007, true}, {8028, true}, {8022, true}, {9001, true}, {9002, true}, {9005, true},
		{1062, false}, {1064, false}, {1146, false}, {8004, false}, {9006, false}, {3106, false},
	} {
		err := &mysql.MySQLError{Number: tc.number, Message: "test"}
		if got := isRetryable(err); got != tc.want {
			t.Errorf("isRetryable(error %d) = %v, want %v", tc.number, got, tc.want)
		}
		if got := isRetryable(fmt.Errorf("sqlstore: claim: %w", err)); got != tc.want {
			t.Errorf("isRetryable(wrapped error %d) = %v, want %v", tc.number, got, tc.want)
		}
	}
	if !isRetryable(&mysql.MySQLError{Number: 1105, Message: "pessimistic lock retry limit reached"}) {
		t.Error("TiDB's pessimistic lock retry limit is not retryable")
	}
	if isRetryable(&mysql.MySQLError{Number: 1105, Message: "unknown error"}) {
		t.Error("any error 1105 is retryable")
	}
	if isRetryable(errors.New("connection refused")) {
		t.Error("a non-MySQL error is retryable")
	}
}
