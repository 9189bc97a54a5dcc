// Package memstore is an in-memory store.Backend for benchmarks and
// simulations: `baton bench scale` decides 100,000 schedules through it,
// at a latency per operation chosen to be Firestore's rather than the
// emulator's, without a cloud and without FerretDB's per-document cost.
//
// It is never a mock for a correctness test that the emulator can run:
// the emulator speaks the wire protocol baton's driver speaks, with the
// strictness of Firestore's MongoDB API (emulator/mongo), and a test that
// runs there proves what production does. memstore proves only that its
// own rules match the contract: it passes shared/store/storetest, the
// conformance suite of every Backend (memstore_test.go), with the same
// guards, errors, fences, compare-and-sets and keyset pages as
// shared/store/mongostore, whose choices it copies method by method
// (including which MongoDB command each write would be, so the suite's
// fault injection lands on the same writes).
//
// Documents are kept as the BSON the driver would send (bson.M made by
// marshalling the domain structs), so omitempty, millisecond times and
// fields the domain types do not know (a schedule's shard, added by
// another change) behave as they do in the database.
//
// Beyond the contract it models what Firestore documents and the emulator
// cannot show at scale (Options):
//
//   - latency per kind of operation (Options.Latency), slept outside the
//     lock, so concurrency, not the machine, sets the throughput;
//   - contention: a write to a document that another write is still
//     committing fails with Aborted (112), as Firestore's optimistic
//     concurrency does, and is retried exactly as mongostore retries it
//     (mongostore.WriteAttempts, the same backoff), ending in
//     store.ErrContended (Options.Contention);
//   - a write-rate cap on a hot index range: writes that put sequential
//     values into one range of an indexed field are paced to 500 a second
//     (Options.HotRanges), and a new database's 500/50/5 ramp
//     (Options.Ramp).
package memstore
