package store

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Meter counts documents read and documents written, per operation and in
// total, so tests and benchmarks can state the Firestore cost of an
// operation (Firestore bills per document read and per document written).
// Reads and writes are kept apart: Total, Op and Snapshot are reads only,
// so callers that sum a collection's read operations never count writes.
// A write is counted when its answer says it landed; one whose answer was
// lost (a timeout) is not, though it may have landed. It is safe for
// concurrent use.
type Meter struct {
	total    atomic.Int64
	writes   atomic.Int64
	mu       sync.Mutex
	byOp     map[string]int64
	writesOp map[string]int64
}

// NewMeter returns an empty meter.
func NewMeter() *Meter { return &Meter{byOp: map[string]int64{}, writesOp: map[string]int64{}} }

// Add records n documents read by op (for example "schedules.page").
func (m *Meter) Add(op string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.total.Add(n)
	m.mu.Lock()
	m.byOp[op] += n
	m.mu.Unlock()
}

// AddWrite records n documents written by op (for example
// "runs.insert").
func (m *Meter) AddWrite(op string, n int64) {
	if m == nil || n == 0 {
		return
	}
	m.writes.Add(n)
	m.mu.Lock()
	m.writesOp[op] += n
	m.mu.Unlock()
}

// Total is the number of documents read since the meter was made or reset.
func (m *Meter) Total() int64 { return m.total.Load() }

// Writes is the number of documents written since the meter was made or
// reset.
func (m *Meter) Writes() int64 { return m.writes.Load() }

// Op is the number of documents read by one operation.
func (m *Meter) Op(op string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byOp[op]
}

// WriteOp is the number of documents written by one operation.
func (m *Meter) WriteOp(op string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writesOp[op]
}

// Snapshot copies the per-operation read counts.
func (m *Meter) Snapshot() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copyCounts(m.byOp)
}

// WriteSnapshot copies the per-operation write counts.
func (m *Meter) WriteSnapshot() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return copyCounts(m.writesOp)
}

func copyCounts(in map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// Ops lists the read operations seen, sorted.
func (m *Meter) Ops() []string {
	snap := m.Snapshot()
	ops := make([]string, 0, len(snap))
	for k := range snap {
		ops = append(ops, k)
	}
	sort.Strings(ops)
	return ops
}

// Reset zeroes the meter, reads and writes.
func (m *Meter) Reset() {
	m.mu.Lock()
	m.byOp = map[string]int64{}
	m.writesOp = map[string]int64{}
	m.total.Store(0)
	m.writes.Store(0)
	m.mu.Unlock()
}
