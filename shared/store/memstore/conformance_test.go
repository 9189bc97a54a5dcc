package memstore_test

import (
	"testing"

	"github.com/baton-cron/baton/shared/store"
	"github.com/baton-cron/baton/shared/store/memstore"
	"github.com/baton-cron/baton/shared/store/storetest"
)

// TestConformance runs the whole storage conformance suite against the
// in-memory store, as mongostore's conformance test runs it against the
// emulator: the same guards, errors, fences, compare-and-sets and pages,
// and the same fault cases, injected by the store itself in place of
// MongoDB's failCommand fail point.
func TestConformance(t *testing.T) {
	storetest.RunBackend(t, harness{})
}

// harness gives each case a fresh store.
type harness struct{}

func (harness) OpenBackend(t *testing.T) store.Backend {
	st := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = st.Close(t.Context()) })
	return st
}

func (harness) BackendFaults(t *testing.T, b store.Backend) (storetest.Faults, string) {
	return faults{b.(*memstore.Store)}, ""
}

// faults arms the store's own injector until the case ends.
type faults struct{ st *memstore.Store }

func (f faults) Refuse(t *testing.T, coll string, times int, code int32, commands ...string) {
	f.st.Refuse(coll, times, code, commands...)
	t.Cleanup(f.st.Disarm)
}

func (f faults) LoseAnswer(t *testing.T, coll string, times int, code int32, commands ...string) {
	f.st.LoseAnswer(coll, times, code, commands...)
	t.Cleanup(f.st.Disarm)
}
