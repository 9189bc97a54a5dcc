package gpubench_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/internal/gpubench"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// TestColdStartModel: on a cold pool no job can start before its
// instance is up, every job still runs once, and in the 429 model the
// starting instances refuse the dispatcher's first sends, which the sweep
// then retries. The warm pass refuses nothing. The bounds come from the
// model (an instance is not up before ColdStart), not from this machine's
// speed.
func TestColdStartModel(t *testing.T) {
	for _, mode := range []string{gpubench.ColdDelay, gpubench.ColdRefuse} {
		t.Run(mode, func(t *testing.T) {
			o := gpubench.ColdOptions{
				Open:    func(string) (*mongostore.Store, error) { return emutest.Store(t), nil },
				Workers: 2, Jobs: 3, ColdStart: 1500 * time.Millisecond, Mode: mode,
				JobDuration: 100 * time.Millisecond, SweepEvery: 500 * time.Millisecond,
			}
			rep, err := gpubench.RunCold(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Cold.FirstStart < o.ColdStart {
				t.Errorf("cold pool started a job after %s, before its instance was up (%s)", rep.Cold.FirstStart, o.ColdStart)
			}
			if rep.Warm.Refused != 0 {
				t.Errorf("warm pool refused %d requests", rep.Warm.Refused)
			}
			if mode == gpubench.ColdRefuse && rep.Cold.Refused == 0 {
				t.Error("429 model: no request was refused while the instances started")
			}
			if mode == gpubench.ColdDelay && rep.Cold.Refused != 0 {
				t.Errorf("delay model refused %d requests", rep.Cold.Refused)
			}
			var out bytes.Buffer
			rep.Print(&out)
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "cold_first_dispatch_ms=") || !strings.Contains(last, "mode="+mode) {
				t.Errorf("last line is not the key=value summary: %q", last)
			}
		})
	}
}
