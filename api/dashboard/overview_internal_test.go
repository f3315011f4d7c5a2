package dashboard

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dagflow/dagflow/api/client"
	"github.com/dagflow/dagflow/engine"
	"github.com/dagflow/dagflow/persistence"
)

// sampleEngine answers the overview's reads from fixed pages; the rest of
// Engine is not called.
type sampleEngine struct {
	Engine
	pages    map[string]persistence.RunPage // by cursor
	nodes    []engine.NodeInfo
	dead     persistence.StepPage
	nodesErr error
	endless  bool // every page is full and has a next one
}

func (e *sampleEngine) Runs(_ context.Context, f engine.RunFilter) (persistence.RunPage, error) {
	if e.endless {
		return persistence.RunPage{Runs: make([]persistence.Run, 1000), NextCursor: "next"}, nil
	}
	p, ok := e.pages[f.Cursor]
	if !ok {
		return persistence.RunPage{}, errors.New("no such page")
	}
	return p, nil
}

func (e *sampleEngine) AllNodes(context.Context) ([]engine.NodeInfo, error) {
	return e.nodes, e.nodesErr
}

func (e *sampleEngine) DeadLetters(context.Context, persistence.StepListDeadParams) (persistence.StepPage, error) {
	return e.dead, nil
}

// TestOverviewSample holds a sample's numbers: the runs per minute over
// every page, the live nodes' rate, dead letters, queue depths, and the
// steps per second of the second sample from the first's count.
func TestOverviewSample(t *testing.T) {
	now := time.Date(2026, 1, 2, 10, 30, 20, 0, time.UTC)
	at := func(minAgo int) time.Time { return now.Add(-time.Duration(minAgo) * time.Minute) }
	fin := func(minAgo int) *time.Time { t := at(minAgo); return &t }
	e := &sampleEngine{
		pages: map[string]persistence.RunPage{
			"": {Runs: []persistence.Run{
				{ID: "a", CreatedAt: at(0), Status: persistence.RunRunning},
				{ID: "b", CreatedAt: at(2), FinishedAt: fin(1), Status: persistence.RunSucceeded},
			}, NextCursor: "p2"},
			"p2": {Runs: []persistence.Run{
				{ID: "c", CreatedAt: at(3), FinishedAt: fin(0), Status: persistence.RunFailed},
				{ID: "d", CreatedAt: at(20), FinishedAt: fin(14), Status: persistence.RunCompensated},
				{ID: "e", CreatedAt: at(30), FinishedAt: fin(20), Status: persistence.RunFailed},
			}},
		},
		nodes: []engine.NodeInfo{
			{Alive: true, StepsDone: 100, StartedAt: now.Add(-100 * time.Second), HeartbeatAt: now},
			{Alive: true, StepsDone: 50, StartedAt: now.Add(-10 * time.Second), HeartbeatAt: now},
			{Alive: false, StepsDone: 1000, StartedAt: now.Add(-time.Hour), HeartbeatAt: now},
		},
		dead: persistence.StepPage{Steps: make([]persistence.StepRun, 3), NextCursor: "more"},
	}
	d := &Dashboard{e: e, cfg: Config{Queues: func(context.Context) ([]client.Queue, error) {
		return []client.Queue{{Name: "q1", Ready: 4}, {Name: "q2", Ready: 5}}, nil
	}}}
	s := newSampler(d)
	od := s.take(context.Background(), now)
	minutes := func(m map[int]int) []int {
		out := make([]int, chartMinutes)
		for ago, n := range m {
			out[chartMinutes-1-ago] = n
		}
		return out
	}
	if want := minutes(map[int]int{0: 1, 2: 1, 3: 1}); !slices.Equal(od.Started, want) {
		t.Errorf("started %v, want %v", od.Started, want)
	}
	if want := minutes(map[int]int{0: 1, 1: 1, 14: 1}); !slices.Equal(od.Finished, want) {
		t.Errorf("finished %v, want %v", od.Finished, want)
	}
	if want := minutes(map[int]int{0: 1, 14: 1}); !slices.Equal(od.Failed, want) {
		t.Errorf("failed %v, want %v", od.Failed, want)
	}
	if od.RunsCapped || od.Nodes != 2 || od.NodesTotal != 3 || od.StepsPerSec != 6 || od.Ready != 9 ||
		!od.QueuesAvailable || len(od.Queues) != 2 || od.Dead != 3 || !od.DeadCapped || od.Err != "" || len(od.Samples) != 1 {
		t.Errorf("first sample %+v", od)
	}
	e.nodes[0].StepsDone += 30
	e.nodesErr = errors.New("nodes down")
	od = s.take(context.Background(), now.Add(10*time.Second))
	if od.StepsPerSec != 3 || len(od.Samples) != 2 || od.Samples[1].StepsPerSec != 3 || od.Samples[1].Ready != 9 ||
		od.Err != "[nodes down]" {
		t.Errorf("second sample %+v", od)
	}
}

// TestOverviewSampleCapsRuns: the runs are read up to runsCap, and the
// sample says so.
func TestOverviewSampleCapsRuns(t *testing.T) {
	now := time.Date(2026, 1, 2, 10, 30, 20, 0, time.UTC)
	s := newSampler(&Dashboard{e: &sampleEngine{endless: true}})
	if od := s.take(context.Background(), now); !od.RunsCapped || od.QueuesAvailable || od.Err != "" {
		t.Errorf("sample %+v", od)
	}
}
