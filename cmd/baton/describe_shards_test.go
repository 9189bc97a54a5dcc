package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestDescribeShowsFires: describe's table shows a sharded schedule's
// shards and each recent fire's aggregate status.
func TestDescribeShowsFires(t *testing.T) {
	ft := time.Date(2026, 3, 2, 9, 1, 0, 0, time.UTC)
	one := 1
	doc := describeDoc{
		Schedule:   schedule.Schedule{ID: "job", Cron: "* * * * *", Shards: 2, ShardParams: []string{"eu", "us"}, Overlap: schedule.OverlapSkip},
		RecentRuns: []schedule.Run{{ID: "job@20260302T090100Z#1", FireTime: ft, Status: schedule.RunFailed, Shard: &one, Shards: 2}},
		Fires: []schedule.Run{schedule.AggregateFire("job@20260302T090100Z", 2, []*schedule.Run{
			{ID: "job@20260302T090100Z#0", FireTime: ft, Status: schedule.RunSucceeded, Attempt: 1},
			{ID: "job@20260302T090100Z#1", FireTime: ft, Status: schedule.RunFailed, Attempt: 1},
		})},
	}
	var b bytes.Buffer
	if err := describeTable(&b, &doc); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"Shards:", "2 (params eu, us)", "Fires (2 shards each; succeeded only when every shard is):",
		"job@20260302T090100Z  2026-03-02T09:01:00Z  failed  1/2 shard(s) succeeded, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe lacks %q:\n%s", want, out)
		}
	}
}
