package memstore

import (
	"context"
	"time"
)

// SetClock replaces the models' clock and sleep, and restarts the ramp at
// now(): the tests prove the models by the waits they ask for, never by
// timing them.
func SetClock(s *Store, now func() time.Time, sleep func(ctx context.Context, kind string, d time.Duration) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now, s.sleep, s.born = now, sleep, now()
}

// KindPace is the kind a paced write's wait is asked for with.
const KindPace = kindPace

// InsertDoc inserts doc into coll through the write path every view's
// insert takes.
func InsertDoc(ctx context.Context, s *Store, coll string, doc any) (bool, error) {
	return s.insert(ctx, coll, doc)
}
