package persistence

import (
	"context"
	"time"
)

// Nodes is the part of a Store that keeps the node registry: each
// node's heartbeat, what it runs, and the nodes long gone.
type Nodes interface {
	// NodeHeartbeat records that a node is alive, with what it can run:
	// it creates the node's row or updates it (HeartbeatAt, Info).
	NodeHeartbeat(ctx context.Context, n Node) error
	// NodeList lists the nodes whose last heartbeat is at or after
	// p.AliveSince, by id.
	NodeList(ctx context.Context, p NodeListParams) ([]Node, error)
	// NodeDeleteStale deletes the nodes whose last heartbeat is before
	// before, returning how many were deleted.
	NodeDeleteStale(ctx context.Context, before time.Time) (int, error)
}

// Node is one engine process as the node registry records it.
type Node struct {
	ID          string
	StartedAt   time.Time
	HeartbeatAt time.Time
	// Info is the node's self-description as JSON (what it can run, its
	// queues, its load); the store keeps it as given (at most 64 KiB).
	Info []byte
}

// NodeListParams are the arguments of Store.NodeList.
type NodeListParams struct {
	AliveSince time.Time
}
