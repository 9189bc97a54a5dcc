// Package gpumodel holds the GPU queue's records: the job and slot
// documents, the job statuses, and the hold (slot, epoch and the hash of
// the dispatch's secret) that fences every write a slot holder makes.
//
// It is a leaf package, importing only other leaf packages, so that both
// the dispatcher (shared/gpu, which re-exports these names) and the
// storage implementation (shared/store/mongostore, which must not import
// shared/gpu) can speak the same records.
package gpumodel
