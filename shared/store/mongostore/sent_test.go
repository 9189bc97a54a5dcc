package mongostore_test

import (
	"context"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// sentLog is what a store opened by openRecorded sent: each command as the
// driver's monitor saw it start.
type sentLog struct {
	mu   sync.Mutex
	cmds []bson.Raw
}

// reset forgets what was sent so far (a test's set-up).
func (l *sentLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cmds = nil
}

// commands returns what was sent since the last reset.
func (l *sentLog) commands() []bson.Raw {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]bson.Raw(nil), l.cmds...)
}

// openRecorded opens a store on a fresh database of the shared emulator
// whose every command is kept in the returned log, and drops and closes
// it when the test ends.
func openRecorded(t *testing.T) (*mongostore.Store, *sentLog) {
	t.Helper()
	ctx := context.Background()
	log := &sentLog{}
	mon := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		log.mu.Lock()
		defer log.mu.Unlock()
		log.cmds = append(log.cmds, append(bson.Raw(nil), e.Command...))
	}}
	st, err := mongostore.OpenMonitored(ctx, emutest.MongoURI(t), mongostore.Options{Database: emutest.DBName(t)}, mon, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = emutest.Raw(t, st).Drop(context.Background())
		_ = st.Close(context.Background())
	})
	return st, log
}
