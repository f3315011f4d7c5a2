package cron_test

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/dagflow/dagflow/cron"
	"github.com/dagflow/dagflow/dag"
	"github.com/dagflow/dagflow/persistence"
)

func TestParseSchedules(t *testing.T) {
	src := `schedules:
  - name: nightly-settlement
    spec: "0 2 * * *"
    workflow: settlement
    time_zone: Europe/Berlin
    input: {region: eu, days: [1, 2]}
    overlap: buffer_one
    catch_up: all
    catch_up_window: 6h
  - name: stock-sync
    spec: "@every 10m"
    workflow: stock
    input: null
`
	got, err := cron.ParseSchedules([]byte(src), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []persistence.Schedule{
		{Name: "nightly-settlement", Spec: "0 2 * * *", Workflow: "settlement", TimeZone: "Europe/Berlin",
			Input: []byte(`{"days":[1,2],"region":"eu"}`), Overlap: "buffer_one", CatchUp: "all", CatchUpWindow: 6 * time.Hour},
		{Name: "stock-sync", Spec: "@every 10m", Workflow: "stock", Overlap: "allow", CatchUp: "latest"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSchedules mismatch (-want +got):\n%s", diff)
	}
}

// Anchors and aliases work for every value, as in workflow files (the
// two loaders share one walker; see dag's TestLoadYAMLAliases).
func TestParseSchedulesAliases(t *testing.T) {
	src := `schedules:
  - name: eu
    spec: &nightly "0 2 * * *"
    workflow: &wf settlement
    time_zone: &tz Europe/Berlin
    input: &in {region: eu, days: [1, 2]}
    catch_up: &cu all
  - name: eu-late
    spec: *nightly
    workflow: *wf
    time_zone: *tz
    input: *in
    catch_up: *cu
    catch_up_window: &w 1h
  - {name: us, spec: "0 3 * * *", workflow: *wf, time_zone: America/New_York, input: {region: us, days: [1, 2]}, catch_up_window: *w}
`
	got, err := cron.ParseSchedules([]byte(src), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	in := []byte(`{"days":[1,2],"region":"eu"}`)
	want := []persistence.Schedule{
		{Name: "eu", Spec: "0 2 * * *", Workflow: "settlement", TimeZone: "Europe/Berlin", Input: in, Overlap: "allow", CatchUp: "all"},
		{Name: "eu-late", Spec: "0 2 * * *", Workflow: "settlement", TimeZone: "Europe/Berlin", Input: in, Overlap: "allow", CatchUp: "all",
			CatchUpWindow: time.Hour},
		{Name: "us", Spec: "0 3 * * *", Workflow: "settlement", TimeZone: "America/New_York",
			Input: []byte(`{"days":[1,2],"region":"us"}`), Overlap: "allow", CatchUp: "latest", CatchUpWindow: time.Hour},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ParseSchedules mismatch (-want +got):\n%s", diff)
	}

	// An aliased item is the same schedule again.
	_, err = cron.ParseSchedules([]byte(strings.Replace(src, "  - name: eu\n", "  - &eu\n    name: eu\n", 1)+"  - *eu\n"), "s.yaml")
	if !errors.Is(err, cron.ErrDuplicateSchedule) {
		t.Errorf("aliased schedule item: %v, want ErrDuplicateSchedule", err)
	}
}

func TestParseSchedulesErrors(t *testing.T) {
	const head = "schedules:\n  - name: x\n"
	tests := []struct {
		name    string
		yaml    string
		wantIs  error
		wantMsg string
	}{
		{name: "unknown field", wantIs: dag.ErrUnknownField,
			yaml:    head + "    spec: \"@daily\"\n    workflow: w\n    cron: \"@daily\"\n",
			wantMsg: "cron: s.yaml:5:5: schedules[0].cron: unknown field (want one of [name spec workflow time_zone input overlap catch_up catch_up_window])"},
		{name: "unknown top-level field", wantIs: dag.ErrUnknownField, yaml: "workflows: []\n",
			wantMsg: "cron: s.yaml:1:1: workflows: unknown field (want one of [schedules])"},
		{name: "repeated field", yaml: head + "    name: y\n    spec: \"@daily\"\n    workflow: w\n",
			wantMsg: "cron: s.yaml:3:5: schedules[0].name: repeated field"},
		{name: "missing field", wantIs: dag.ErrMissingField, yaml: head + "    workflow: w\n",
			wantMsg: "cron: s.yaml:2:5: schedules[0].spec: missing field"},
		{name: "missing fields", wantIs: dag.ErrMissingField, yaml: "schedules:\n  - {}\n",
			wantMsg: "cron: s.yaml:2:5: schedules[0].name: missing field\n" +
				"cron: s.yaml:2:5: schedules[0].spec: missing field\n" +
				"cron: s.yaml:2:5: schedules[0].workflow: missing field"},
		{name: "missing list", wantIs: dag.ErrMissingField, yaml: "{}\n",
			wantMsg: "cron: s.yaml:1:1: schedules: missing field"},
		{name: "invalid spec", wantIs: cron.ErrInvalidSpec, yaml: head + "    spec: \"0 25 * * *\"\n    workflow: w\n",
			wantMsg: `cron: s.yaml:3:11: schedules[0].spec: schedule "x": invalid spec "0 25 * * *": end of range (25) above maximum (23): 25`},
		{name: "invalid time zone", wantIs: cron.ErrInvalidTimeZone,
			yaml:    head + "    spec: \"@daily\"\n    workflow: w\n    time_zone: Local\n",
			wantMsg: `cron: s.yaml:5:16: schedules[0].time_zone: schedule "x": invalid time zone "Local": name an IANA zone; Local differs between nodes`},
		{name: "unknown catch-up policy", yaml: head + "    spec: \"@daily\"\n    workflow: w\n    catch_up: sometimes\n",
			wantMsg: `cron: s.yaml:5:15: schedules[0].catch_up: unknown catch-up policy "sometimes" (want none, latest or all)`},
		{name: "unknown overlap policy", yaml: head + "    spec: \"@daily\"\n    workflow: w\n    overlap: sometimes\n",
			wantMsg: `cron: s.yaml:5:14: schedules[0].overlap: unknown overlap policy "sometimes" (want allow, skip or buffer_one)`},
		{name: "negative window", yaml: head + "    spec: \"@daily\"\n    workflow: w\n    catch_up_window: -1h\n",
			wantMsg: `cron: s.yaml:5:22: schedules[0].catch_up_window: want a non-negative Go duration like 6h, got "-1h"`},
		{name: "wrong type", yaml: head + "    spec: [\"@daily\"]\n    workflow: w\n",
			wantMsg: `cron: s.yaml:3:11: schedules[0].spec: want a string, got a list`},
		{name: "not a list", yaml: "schedules: {name: x}\n",
			wantMsg: `cron: s.yaml:1:12: schedules: want a list of schedules, got a mapping`},
		{name: "not a mapping", yaml: "schedules:\n  - x\n",
			wantMsg: `cron: s.yaml:2:5: schedules[0]: want a schedule mapping, got "x"`},
		{name: "duplicate", wantIs: cron.ErrDuplicateSchedule,
			yaml:    head + "    spec: \"@daily\"\n    workflow: w\n  - {name: x, spec: \"@hourly\", workflow: w}\n",
			wantMsg: `cron: s.yaml:5:12: schedules[1].name: duplicate schedule: schedule "x" is also declared at s.yaml:2:11`},
		{name: "syntax", yaml: "schedules: [\n", wantMsg: `cron: s.yaml:1: did not find expected node content`},
		{name: "empty", yaml: "", wantMsg: `cron: s.yaml: empty document`},
		{name: "two documents", yaml: "schedules: []\n---\nschedules: []\n",
			wantMsg: `cron: s.yaml:2:1: more than one YAML document (one schedules list per file)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cron.ParseSchedules([]byte(tt.yaml), "s.yaml")
			if err == nil {
				t.Fatalf("ParseSchedules() = %v, nil; want error %q", got, tt.wantMsg)
			}
			if got != nil {
				t.Errorf("ParseSchedules() = %v with an error, want nil", got)
			}
			if msg := err.Error(); msg != tt.wantMsg {
				t.Errorf("ParseSchedules() error\n got: %s\nwant: %s", msg, tt.wantMsg)
			}
			var ye *dag.YAMLError
			if !errors.As(err, &ye) || ye.File != "s.yaml" {
				t.Errorf("errors.As(*dag.YAMLError) = %v for %T", ye, err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("errors.Is(err, %v) = false", tt.wantIs)
			}
		})
	}
}

func TestParseSchedulesSpecErrorIsReachable(t *testing.T) {
	_, err := cron.ParseSchedules([]byte("schedules:\n  - {name: x, spec: \"0 25 * * *\", workflow: w}\n"), "s.yaml")
	var se *cron.SpecError
	if !errors.As(err, &se) || se.Schedule != "x" || se.Spec != "0 25 * * *" {
		t.Errorf("errors.As(*SpecError) = %+v for %v", se, err)
	}
}

func TestLoadSchedules(t *testing.T) {
	fsys := fstest.MapFS{
		"b.yml":          {Data: []byte("schedules:\n  - {name: b, spec: \"@hourly\", workflow: w}\n")},
		"a.yaml":         {Data: []byte("schedules:\n  - {name: a1, spec: \"@daily\", workflow: w}\n  - {name: a2, spec: \"@daily\", workflow: w}\n")},
		"notes.txt":      {Data: []byte("not schedules")},
		"sub/c.yaml":     {Data: []byte("broken: [")},
		"z.yaml.example": {Data: []byte("broken: [")},
	}
	list, err := cron.LoadSchedules(fsys)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sc := range list {
		got = append(got, sc.Name)
	}
	if diff := cmp.Diff([]string{"a1", "a2", "b"}, got); diff != "" {
		t.Errorf("LoadSchedules names mismatch (-want +got):\n%s", diff)
	}

	// Every file's problems, together; a name declared in two files.
	fsys["c.yaml"] = &fstest.MapFile{Data: []byte("schedules:\n  - {name: a2, spec: \"@daily\", workflow: w}\n")}
	fsys["d.yaml"] = &fstest.MapFile{Data: []byte("schedules:\n  - {name: d, spec: \"@daily\", workflow: w, colour: red}\n")}
	list, err = cron.LoadSchedules(fsys)
	want := `cron: c.yaml:2:12: schedules[0].name: duplicate schedule: schedule "a2" is also declared at a.yaml:3:12` + "\n" +
		`cron: d.yaml:2:44: schedules[0].colour: unknown field (want one of [name spec workflow time_zone input overlap catch_up catch_up_window])`
	if err == nil || err.Error() != want || list != nil {
		t.Errorf("LoadSchedules() = %v, %v\nwant nil, %s", list, err, want)
	}
	if !errors.Is(err, cron.ErrDuplicateSchedule) || !errors.Is(err, dag.ErrUnknownField) {
		t.Errorf("errors.Is: %v", err)
	}
}
