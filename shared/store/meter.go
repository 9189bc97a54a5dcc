package store

import (
	"sort"
	"sync"
	"sync/atomic"
)

// Meter counts documents read, per operation and in total, so tests and
// benchmarks can state the Firestore read cost of an operation. It is safe
// for concurrent use.
type Meter struct {
	total atomic.Int64
	mu    sync.Mutex
	byOp  map[string]int64
}

// NewMeter returns an empty meter.
func NewMeter() *Meter { return &Meter{byOp: map[string]int64{}} }

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

// Total is the number of documents read since the meter was made or reset.
func (m *Meter) Total() int64 { return m.total.Load() }

// Op is the number of documents read by one operation.
func (m *Meter) Op(op string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.byOp[op]
}

// Snapshot copies the per-operation counts.
func (m *Meter) Snapshot() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]int64, len(m.byOp))
	for k, v := range m.byOp {
		out[k] = v
	}
	return out
}

// Ops lists the operations seen, sorted.
func (m *Meter) Ops() []string {
	snap := m.Snapshot()
	ops := make([]string, 0, len(snap))
	for k := range snap {
		ops = append(ops, k)
	}
	sort.Strings(ops)
	return ops
}

// Reset zeroes the meter.
func (m *Meter) Reset() {
	m.mu.Lock()
	m.byOp = map[string]int64{}
	m.total.Store(0)
	m.mu.Unlock()
}
