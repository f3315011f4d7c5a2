package mysql_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTiDBPlanReading: tidbAccesses reads TiDB's plans, as its EXPLAIN
// draws them, into MySQL's terms, which TestQueriesUseIndexes checks: a
// range of an index or of the clustered key, point gets, a full index
// scan, and one that a TopN or a Sort above it must order, a full table
// scan; and a Sort above a union orders the union, not each branch.
func TestTiDBPlanReading(t *testing.T) {
	for _, tc := range []struct {
		name string
		plan string // id, estRows, access object, operator info; tab-separated
		want []string
	}{
		{"index range in order", `
Limit_12	51.00		offset:0, count:51
└─IndexLookUp_21	51.00		
  ├─Limit_20(Build)	51.00		offset:0, count:51
  │ └─IndexRangeScan_18	51.00	table:workflow_runs, index:idx_runs_wf_created(workflow, created_at, id)	range:["w1","w1"], keep order:true, desc
  └─TableRowIDScan_19(Probe)	51.00	table:workflow_runs	keep order:false`,
			[]string{"workflow_runs range idx_runs_wf_created sorted:false"}},
		{"index range sorted by TopN", `
TopN_9	100.00		test.step_runs.due_at, offset:0, count:100
└─IndexLookUp_18	100.00		
  ├─IndexRangeScan_15(Build)	20.00	table:step_runs, index:idx_steps_wf_due(status, workflow, due_at, run_id, step)	range:["queued","queued"], keep order:false
  └─TopN_17(Probe)	100.00		test.step_runs.due_at, offset:0, count:100
    └─TableRowIDScan_16	20.00	table:step_runs	keep order:false`,
			[]string{"step_runs range idx_steps_wf_due sorted:true"}},
		{"full index scan under Sort", `
Sort_5	204.00		test.api_keys.name
└─IndexReader_9	204.00		index:IndexFullScan_8
  └─IndexFullScan_8	204.00	table:api_keys, index:idx_api_keys_created(created_at, id)	keep order:false`,
			[]string{"api_keys index idx_api_keys_created sorted:true"}},
		{"full table scan", `
TableReader_7	10.00		data:Selection_6
└─Selection_6	10.00		eq(test.t.b, 1)
  └─TableFullScan_5	10000.00	table:t	keep order:false`,
			[]string{"t ALL PRIMARY sorted:false"}},
		{"point gets", `
Point_Get_1	1.00	table:api_keys, index:uq_api_keys_hash(hash)	`,
			[]string{"api_keys const uq_api_keys_hash sorted:false"}},
		{"batch point get on the clustered key", `
Batch_Point_Get_1	3.00	table:step_runs, clustered index:PRIMARY(run_id, step)	keep order:false, desc:false`,
			[]string{"step_runs range PRIMARY sorted:false"}},
		{"clustered key range", `
TableReader_6	300.00		data:TableRangeScan_5
└─TableRangeScan_5	300.00	table:step_runs	range:["a" "x","a" "x"], keep order:true`,
			[]string{"step_runs range PRIMARY sorted:false"}},
		{"union sorted as a whole", `
Sort_20	51.00		Column#38:desc
└─Union_22	51.00		
  ├─Limit_25	51.00		offset:0, count:51
  │ └─IndexReader_31	51.00		index:Limit_30
  │   └─IndexRangeScan_28	51.00	table:workflow_runs, index:idx_runs_status_created(status, created_at, id)	range:["failed","failed"], keep order:true, desc
  └─Limit_33	51.00		offset:0, count:51
    └─IndexReader_39	51.00		index:Limit_38
      └─IndexRangeScan_36	51.00	table:workflow_runs, index:idx_runs_status_created(status, created_at, id)	range:["cancelled","cancelled"], keep order:true, desc`,
			[]string{"workflow_runs range idx_runs_status_created sorted:false", "workflow_runs range idx_runs_status_created sorted:false"}},
	} {
		var plan []map[string]string
		for _, line := range strings.Split(strings.TrimPrefix(tc.plan, "\n"), "\n") {
			f := strings.Split(line, "\t")
			plan = append(plan, map[string]string{"id": f[0], "estRows": f[1], "task": "root", "access object": f[2], "operator info": f[3]})
		}
		var got []string
		for _, r := range tidbAccesses(plan) {
			got = append(got, r["table"]+" "+r["type"]+" "+r["key"]+" sorted:"+map[bool]string{true: "true", false: "false"}[strings.Contains(r["Extra"], "filesort")])
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
