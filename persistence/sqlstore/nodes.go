package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dagflow/dagflow/internal/jsoncheck"
	"github.com/dagflow/dagflow/persistence"
)

// The store's identity and the node registry (MySQL migration 00007,
// SQLite 00006).

const (
	// MaxNodeIDLen is the longest node id, in bytes.
	MaxNodeIDLen = 128
	// MaxNodeInfo is the largest node Info, in bytes.
	MaxNodeInfo = 64 << 10
)

// StoreID implements persistence.Store: the store_id row of dagflow_meta,
// which the migration that created the table wrote. It is read once and
// kept.
func (s *Store) StoreID(ctx context.Context) (string, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.storeID != "" {
		return s.storeID, nil
	}
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT value FROM dagflow_meta WHERE name = 'store_id'`).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows) || (err == nil && id == ""):
		return "", errors.New("sqlstore: store id: the database has no store id (dagflow_meta has no store_id row): is it migrated?")
	case err != nil:
		return "", wrap("store id", err)
	}
	s.storeID = id
	return id, nil
}

// validNode checks a node's id and Info.
func validNode(n persistence.Node) error {
	if err := validNodeToken("node id", n.ID, MaxNodeIDLen); err != nil {
		return err
	}
	if len(n.Info) > MaxNodeInfo {
		return &persistence.LimitError{Field: fmt.Sprintf("node %q info", n.ID), Size: len(n.Info), Limit: MaxNodeInfo}
	}
	if len(n.Info) > 0 {
		if err := jsoncheck.Check(n.Info); err != nil {
			return invalid(fmt.Sprintf("node %q info", n.ID), string(n.Info), err.Error())
		}
	}
	return nil
}

// NodeHeartbeat implements persistence.Store: an upsert of the node's row.
// StartedAt is kept from the first heartbeat (n.StartedAt, or
// n.HeartbeatAt without one); HeartbeatAt and Info are replaced.
func (s *Store) NodeHeartbeat(ctx context.Context, n persistence.Node) error {
	if err := validNode(n); err != nil {
		return err
	}
	if n.HeartbeatAt.IsZero() {
		return invalid(fmt.Sprintf("node %q heartbeat time", n.ID), "", "is zero")
	}
	beat := norm(n.HeartbeatAt)
	started := beat
	if !n.StartedAt.IsZero() {
		started = norm(n.StartedAt)
	}
	_, err := s.exec1(ctx, `INSERT INTO dagflow_nodes (id, started_at, heartbeat_at, info) VALUES (?, ?, ?, ?)`+
		s.d.Upsert([]string{"id"}, []string{"heartbeat_at", "info"}),
		n.ID, s.t(started), s.t(beat), nonEmpty(n.Info))
	return wrap("node heartbeat", err)
}

// NodeList implements persistence.Store: a range of idx_nodes_heartbeat
// (heartbeat_at, id), sorted by id. A zero AliveSince lists every node.
func (s *Store) NodeList(ctx context.Context, p persistence.NodeListParams) ([]persistence.Node, error) {
	since := p.AliveSince
	if since.IsZero() {
		since = time.Unix(0, 0)
	}
	var rows []struct {
		ID          string `db:"id"`
		StartedAt   dbTime `db:"started_at"`
		HeartbeatAt dbTime `db:"heartbeat_at"`
		Info        []byte `db:"info"`
	}
	if err := s.selectAll(ctx, s.db, &rows, `SELECT id, started_at, heartbeat_at, info FROM dagflow_nodes`+
		s.d.useIndex("idx_nodes_heartbeat")+` WHERE heartbeat_at >= ? ORDER BY id`, s.t(norm(since))); err != nil {
		return nil, wrap("node list", err)
	}
	out := make([]persistence.Node, len(rows))
	for i, r := range rows {
		out[i] = persistence.Node{ID: r.ID, StartedAt: r.StartedAt.T, HeartbeatAt: r.HeartbeatAt.T, Info: nonEmpty(r.Info)}
	}
	return out, nil
}

// NodeDeleteStale implements persistence.Store: deletes by a range of
// idx_nodes_heartbeat. A zero before is refused (it would mean now, and
// delete every node).
func (s *Store) NodeDeleteStale(ctx context.Context, before time.Time) (int, error) {
	if before.IsZero() {
		return 0, invalid("node stale time", "", "is zero")
	}
	n, err := s.exec1(ctx, `DELETE FROM dagflow_nodes WHERE heartbeat_at < ?`, s.t(norm(before)))
	return int(n), wrap("node delete stale", err)
}

// NodeQueries returns the node registry's reads for the nodes alive
// since aliveSince, and the stale ones before staleBefore (what
// NodeDeleteStale deletes), for tests to EXPLAIN. NodeList sorts the live
// nodes by id.
func (s *Store) NodeQueries(aliveSince, staleBefore time.Time) []Query {
	return []Query{
		{Name: "NodeList", SQL: `SELECT id, started_at, heartbeat_at, info FROM dagflow_nodes` +
			s.d.useIndex("idx_nodes_heartbeat") + ` WHERE heartbeat_at >= ? ORDER BY id`, Args: []any{s.t(norm(aliveSince))}},
		{Name: "NodeDeleteStale", SQL: `SELECT id FROM dagflow_nodes WHERE heartbeat_at < ?`, Args: []any{s.t(norm(staleBefore))}},
	}
}
