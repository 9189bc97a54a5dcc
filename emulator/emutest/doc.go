// Package emutest gives tests real emulators with one call: a Firestore-like
// MongoDB API (emulator/mongo) and a GCS (emulator/gcs). One emulator process
// is shared by the tests of a package; each test gets its own database or
// bucket, so tests can run in parallel without seeing each other's data.
package emutest
