package catalog_test

import (
	"errors"
	"net/http"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestCreateWhoseAnswerWasLost: the insert lands and its answer is lost
// (Firestore's DeadlineExceeded after the commit). The store's retry then
// finds the id taken, and a create that succeeded must not be answered
// 409; a different schedule under the id still is. Not parallel: it arms
// the emulator's one fail point.
func TestCreateWhoseAnswerWasLost(t *testing.T) {
	const body = `{"id":"lost","cron":"30 2 * * *","target":{"type":"http","http":{"url":"https://hooks.example.com/run"}}}`
	t.Run("our own create", func(t *testing.T) {
		b := setup(t)
		emutest.FailCommandCodeAfterRun(t, b.st, schedule.SchedulesCollection, bson.D{{Key: "times", Value: 1}}, 262, "insert")
		if res := b.do(t, http.MethodPost, "/schedules", body); res.Status != http.StatusCreated {
			t.Fatalf("create whose answer was lost: status %d, body %s; want 201", res.Status, res.Body)
		}
	})
	t.Run("someone else's schedule under the id", func(t *testing.T) {
		b := setup(t)
		if res := b.do(t, http.MethodPost, "/schedules", body); res.Status != http.StatusCreated {
			t.Fatalf("first create: status %d, body %s", res.Status, res.Body)
		}
		b.clock.Set(t0.Add(1e9)) // a later create has another createdAt
		_, err := b.svc.Create(t.Context(), &schedule.Schedule{ID: "lost", Cron: "30 2 * * *",
			Target: schedule.Target{Type: schedule.TargetHTTP, HTTP: &schedule.HTTPTarget{URL: "https://hooks.example.com/run"}}})
		if !errors.Is(err, catalog.ErrExists) {
			t.Errorf("second create of the id: %v, want ErrExists", err)
		}
	})
}
