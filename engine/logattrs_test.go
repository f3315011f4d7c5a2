package engine

import (
	"bytes"
	"log/slog"
	"regexp"
	"testing"
)

func TestWithLazyLogsAsWith(t *testing.T) {
	var eager, lazy bytes.Buffer
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	a := slog.New(slog.NewTextHandler(&eager, opts)).With("node", "n1")
	b := slog.New(slog.NewTextHandler(&lazy, opts)).With("node", "n1")

	la := a.With("run_id", "r1", "step", "s", "attempt", 2)
	lb := withLazy(b, slog.String("run_id", "r1"), slog.String("step", "s"), slog.Int("attempt", 2))
	for _, l := range []*slog.Logger{la, lb} {
		l.Debug("below the level")
		l.Info("step skipped", "reason", "when is false")
		l.With("extra", true).WithGroup("g").Warn("grouped", "k", "v")
		l.Error("after a With, the first logger still has its own attributes")
	}
	// The time attribute differs between the two handlers' calls.
	clock := regexp.MustCompile(`time=\S+ `)
	got, want := clock.ReplaceAllString(lazy.String(), ""), clock.ReplaceAllString(eager.String(), "")
	if got != want {
		t.Fatalf("withLazy logged\n%s\nbase.With logged\n%s", got, want)
	}
	if !bytes.Contains(eager.Bytes(), []byte(`run_id=r1 step=s attempt=2 reason="when is false"`)) ||
		bytes.Contains(eager.Bytes(), []byte("below the level")) {
		t.Fatalf("unexpected reference output:\n%s", eager.String())
	}
	if lb.Enabled(t.Context(), slog.LevelDebug) || !lb.Enabled(t.Context(), slog.LevelInfo) {
		t.Fatal("withLazy's logger does not follow its base's level")
	}
}
