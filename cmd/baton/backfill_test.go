package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestSchedulesBackfillCLI: a dry run prints the fire times and writes
// nothing; the real call creates them; a repeat creates none; bad flags
// exit 2 before any request.
func TestSchedulesBackfillCLI(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "every5", "--cron", "*/5 * * * *", "--builtin", "noop")
	to := time.Now().UTC().Truncate(time.Hour)
	from := to.Add(-time.Hour) // 12 fire times
	args := []string{"schedules", "backfill", "every5", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339)}

	out := b.ok(t, append(args, "--dry-run")...)
	if !strings.Contains(out, "dry run: 12 fire times, 0 already have a run; nothing written") || !strings.Contains(out, from.Format(time.RFC3339)) {
		t.Errorf("dry run printed:\n%s", out)
	}
	if n, err := b.st.Collection(schedule.RunsCollection).Count(context.Background(), bson.D{}); err != nil || n != 0 {
		t.Fatalf("a dry run wrote %d runs (%v)", n, err)
	}
	if out := b.ok(t, args...); !strings.Contains(out, "12 fire times, 12 runs created, 0 already there") {
		t.Errorf("backfill printed %q", out)
	}
	if out := b.ok(t, append(args, "-o", "json")...); !strings.Contains(out, `"created": 0`) || !strings.Contains(out, `"existing": 12`) {
		t.Errorf("repeat printed %q; want 0 created, 12 existing", out)
	}
	for _, bad := range [][]string{
		{"schedules", "backfill", "every5"},
		{"schedules", "backfill", "every5", "--from", "yesterday"},
		{"schedules", "backfill", "every5", "--from", "1h", "--to", "soon"},
	} {
		if _, _, err := b.run(t, "", bad...); exitCode(err) != 2 {
			t.Errorf("baton %s: exit %d (%v); want 2", strings.Join(bad, " "), exitCode(err), err)
		}
	}
}

// TestNextForASchedule: `next --schedule ID` prints the schedule's real
// times (its jitter applied), where `next EXPR` prints the bare cron's.
func TestNextForASchedule(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "spread", "--cron", "0 * * * *", "--builtin", "noop")
	if err := b.st.Collection(schedule.SchedulesCollection).UpdateOne(context.Background(), bson.D{{Key: "_id", Value: "spread"}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "jitter", Value: "30m0s"}}}}); err != nil {
		t.Fatal(err)
	}
	root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newNextCmd(time.Now, b.client))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"next", "--schedule", "spread", "-n", "2", "-o", "json"})
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	off := schedule.JitterOffset("spread", 30*time.Minute)
	var doc nextDoc
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || len(doc.FireTimes) != 2 {
		t.Fatalf("next --schedule printed %q (%v)", out.String(), err)
	}
	for _, ft := range doc.FireTimes {
		if got := ft.Sub(ft.Truncate(time.Hour)); got != off {
			t.Errorf("fire %s is %s past the hour; want the jitter offset %s", ft, got, off)
		}
	}
	if doc.Schedule != "spread" || doc.Expression != "0 * * * *" {
		t.Errorf("doc %+v", doc)
	}
}
