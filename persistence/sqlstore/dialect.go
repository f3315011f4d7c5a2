package sqlstore

import (
	"database/sql"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// Dialect is what differs between the SQL databases the Store runs on.
type Dialect struct {
	// Name identifies the dialect in error messages ("mysql", "sqlite").
	Name string
	// MultiStatements: the connection runs several statements, separated
	// by semicolons, sent in one call (one round trip). Set it only for a
	// database whose connections allow it (mysql.Open forces the DSN's
	// multiStatements and sets it); without it statements go one by one.
	MultiStatements bool
	// BindType is the sqlx bind type the queries are rebound to; the queries
	// are written with '?' placeholders.
	BindType int
	// ForUpdate is appended to SELECTs that read rows the transaction is
	// about to change (" FOR UPDATE"); empty where the database locks
	// whole transactions instead.
	ForUpdate string
	// ByPrimaryKey follows the table name of a statement that names its
	// rows by primary key (" FORCE INDEX (PRIMARY)"), so that it reads
	// (and locks) just them whatever the table's statistics say: a planner
	// that takes the table for small (a new one, or stale statistics) may
	// otherwise scan all of it. Empty where the planner needs no hint.
	ByPrimaryKey string
	// RowValueIn: "(a, b) IN ((?, ?), ...)" of two or more pairs is read
	// through an index on (a, b) (MySQL 5.7+, MariaDB; for one pair
	// MariaDB scans, so one is always "a = ? AND b = ?"). Pairs are
	// otherwise matched by an OR of ANDs, which costs the server time
	// quadratic in their number.
	RowValueIn bool
	// UseIndex returns what follows a table name to make a SELECT read the
	// named index (" FORCE INDEX (name)", " INDEXED BY name"), for the
	// listings whose every page must be a range of one known index: a
	// planner's cost estimate may otherwise prefer reading an index from
	// its end (MariaDB reads a workflow's runs newest first up to a deep
	// page's cursor, every newer run of the workflow on the way). Both
	// databases fail a statement whose index is missing rather than
	// scanning, so a dropped or renamed index shows at once. Nil leaves
	// the choice to the planner.
	UseIndex func(index string) string
	// AsID converts a text expression of the default character set to
	// the ids' (ascii_bin on MySQL), so that comparing it with an id
	// column reads that column's index: MySQL would otherwise convert the
	// id column instead and read no index of it. Nil: the expression as
	// it is (SQLite has one text type).
	AsID func(expr string) string
	// ExactText returns a condition that, ANDed after "expr = ?" (which
	// reads expr's index), makes the two equal byte for byte: the PAD
	// SPACE collations of MySQL, MariaDB and TiDB (utf8mb4_bin) take
	// "D-4004" and "D-4004 " for equal. For a _bin collation, values equal
	// but for trailing spaces and of one length in bytes are the same
	// bytes; a comparison of casts to BINARY is no such check on TiDB,
	// which still ignored the trailing spaces. Nil where text compares
	// byte-exact already (SQLite's BINARY collation).
	ExactText func(expr string) string
	// SerializeWrites makes the Store run one write transaction at a time
	// in this process (SQLite allows one writer per database).
	SerializeWrites bool
	// Time encodes a UTC, microsecond-truncated time as a query argument.
	Time func(time.Time) any
	// IsDuplicate reports a unique-key violation.
	IsDuplicate func(error) bool
	// IsRetryable reports an error after which the whole transaction may be
	// retried (deadlock victim, lock wait timeout, busy database).
	IsRetryable func(error) bool
	// Upsert returns the clause appended to an INSERT that turns it into an
	// update of the update columns when the conflict columns already exist.
	Upsert func(conflict, update []string) string
	// NowSQL is a query that returns the database server's clock as
	// seconds since the Unix epoch (with a fraction).
	NowSQL string
	// InsertIgnore returns the clause appended to an INSERT that makes a
	// duplicate of the conflict columns a no-op (without hiding other
	// errors, unlike MySQL's INSERT IGNORE).
	InsertIgnore func(conflict []string) string
	// InsertOnce returns the clause appended to an INSERT that makes a
	// duplicate of the conflict column a no-op which still locks the
	// existing row exclusively (never a duplicate-key error, which leaves
	// a shared lock behind); Existed reports from the statement's result
	// whether the row was there already. MySQL counts a matched row as
	// affected (clientFoundRows), so there the no-op update records the
	// fact as the statement's insert id (LAST_INSERT_ID(1)), which an
	// insert into a table without AUTO_INCREMENT leaves 0 on MySQL and
	// MariaDB (TiDB may report it of a fresh insert too; eventCreate
	// then compares the row with what it wrote).
	InsertOnce func(conflict string) string
	Existed    func(sql.Result) (bool, error)
	// NamedLockSQL and NamedUnlockSQL take and release a lock named by
	// their one argument for the session (MySQL's GET_LOCK, waiting up to
	// 50 s; the first returns 1 when it has the lock). Creates of one key
	// take it around their INSERT so that at most one of them waits on an
	// uncommitted holder: InnoDB gives every waiter a gap lock when the
	// holder rolls back, and two waiters' inserts then deadlock. Empty
	// where the database locks whole transactions instead.
	NamedLockSQL, NamedUnlockSQL string
	// TableExistsSQL counts the tables of the database named by its one
	// argument (0 or 1), readable by a user without DDL rights.
	TableExistsSQL string
}

// asID returns d.AsID(expr), or expr without one.
func (d Dialect) asID(expr string) string {
	if d.AsID == nil {
		return expr
	}
	return d.AsID(expr)
}

// textEq returns "expr = ?" for a free text value (a correlation), made
// byte-exact where the database's collation needs it (Dialect.ExactText),
// with its arguments.
func (d Dialect) textEq(expr, v string) (string, []any) {
	if d.ExactText == nil {
		return expr + " = ?", []any{v}
	}
	return expr + " = ? AND " + d.ExactText(expr), []any{v, v}
}

// useIndex returns d.UseIndex(index), or "" without one.
func (d Dialect) useIndex(index string) string {
	if d.UseIndex == nil {
		return ""
	}
	return d.UseIndex(index)
}

func (d Dialect) rebind(q string) string {
	if d.BindType == sqlx.QUESTION || d.BindType == sqlx.UNKNOWN {
		return q
	}
	return sqlx.Rebind(d.BindType, q)
}

// TimeLayout is the fixed-width text form of a time in the SQLite store;
// it sorts in time order.
const TimeLayout = "2006-01-02 15:04:05.000000"

// MySQL is the dialect of MySQL 8 and MariaDB 10.6+ (InnoDB).
func MySQL(isDuplicate, isRetryable func(error) bool) Dialect {
	return Dialect{
		Name:           "mysql",
		BindType:       sqlx.QUESTION,
		ForUpdate:      " FOR UPDATE",
		ByPrimaryKey:   " FORCE INDEX (PRIMARY)",
		RowValueIn:     true,
		UseIndex:       func(index string) string { return " FORCE INDEX (" + index + ")" },
		AsID:           func(expr string) string { return "CONVERT(" + expr + " USING ascii) COLLATE ascii_bin" },
		ExactText:      func(expr string) string { return "LENGTH(" + expr + ") = LENGTH(?)" },
		Time:           func(t time.Time) any { return t },
		NowSQL:         "SELECT UNIX_TIMESTAMP(NOW(6))",
		TableExistsSQL: "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?",
		IsDuplicate:    isDuplicate,
		IsRetryable:    isRetryable,
		Upsert: func(_, update []string) string {
			// VALUES(col) is deprecated (not removed) in MySQL 8.0.20+, but it
			// is the only form MariaDB understands.
			sets := make([]string, len(update))
			for i, c := range update {
				sets[i] = c + " = VALUES(" + c + ")"
			}
			return " ON DUPLICATE KEY UPDATE " + strings.Join(sets, ", ")
		},
		InsertIgnore: func(conflict []string) string {
			return " ON DUPLICATE KEY UPDATE " + conflict[0] + " = " + conflict[0]
		},
		NamedLockSQL:   "SELECT GET_LOCK(?, 50)",
		NamedUnlockSQL: "SELECT RELEASE_LOCK(?)",
		InsertOnce: func(conflict string) string {
			return " ON DUPLICATE KEY UPDATE " + conflict + " = IF(LAST_INSERT_ID(1) = 1, " + conflict + ", " + conflict + ")"
		},
		Existed: func(r sql.Result) (bool, error) {
			id, err := r.LastInsertId()
			return id == 1, err
		},
	}
}

// SQLite is the dialect of SQLite 3.35+.
func SQLite(isDuplicate, isRetryable func(error) bool) Dialect {
	return Dialect{
		Name:            "sqlite",
		BindType:        sqlx.QUESTION,
		ForUpdate:       "",
		SerializeWrites: true,
		UseIndex:        func(index string) string { return " INDEXED BY " + index },
		Time:            func(t time.Time) any { return t.Format(TimeLayout) },
		NowSQL:          "SELECT (julianday('now') - 2440587.5) * 86400.0",
		TableExistsSQL:  "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?",
		IsDuplicate:     isDuplicate,
		IsRetryable:     isRetryable,
		Upsert: func(conflict, update []string) string {
			sets := make([]string, len(update))
			for i, c := range update {
				sets[i] = c + " = excluded." + c
			}
			return " ON CONFLICT (" + strings.Join(conflict, ", ") + ") DO UPDATE SET " + strings.Join(sets, ", ")
		},
		InsertIgnore: func(conflict []string) string {
			return " ON CONFLICT (" + strings.Join(conflict, ", ") + ") DO NOTHING"
		},
		InsertOnce: func(conflict string) string {
			return " ON CONFLICT (" + conflict + ") DO NOTHING"
		},
		Existed: func(r sql.Result) (bool, error) {
			n, err := r.RowsAffected()
			return n == 0, err
		},
	}
}
