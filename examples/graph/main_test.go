package main

import (
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	tests := []struct {
		args    []string
		prefix  string
		wantErr string
	}{
		{args: nil, prefix: "flowchart TD\n    reserve[\"reserve\"]\n"},
		{args: []string{"-format", "dot"}, prefix: "digraph \"order\" {\n"},
		{args: []string{"-format", "svg"}, wantErr: `unknown format "svg" (want mermaid or dot)`},
		{args: []string{"-workflow", "refund"}, wantErr: `no workflow "refund"`},
	}
	for _, tt := range tests {
		var out strings.Builder
		err := run(&out, tt.args)
		if tt.wantErr != "" {
			if err == nil || err.Error() != tt.wantErr {
				t.Errorf("run(%q) error = %v, want %q", tt.args, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("run(%q): %v", tt.args, err)
		}
		if !strings.HasPrefix(out.String(), tt.prefix) {
			t.Errorf("run(%q) output:\n%s\nwant prefix:\n%s", tt.args, out.String(), tt.prefix)
		}
	}
}
