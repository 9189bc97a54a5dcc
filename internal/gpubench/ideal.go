package gpubench

import (
	"cmp"
	"container/heap"
	"slices"
	"time"
)

// Ideal is what a perfect dispatcher would do with jobs on k slots: one
// central queue in the dispatcher's order (priority descending, then
// arrival, then id), work-conserving (a slot never idles while a job
// waits) and with no overhead (a job starts the instant a slot frees or it
// arrives). It runs in virtual time and is a pure function of its inputs,
// so the benchmark can set each real run against the best any dispatcher
// could have done with the same arrivals and durations. Result's Makespan
// is from the first arrival to the last finish; its bounds are left zero.
func Ideal(jobs []Job, k int) Result {
	res := Result{Name: "ideal"}
	if len(jobs) == 0 || k < 1 {
		return res
	}
	byArrival := slices.Clone(jobs)
	slices.SortStableFunc(byArrival, func(a, b Job) int { return cmp.Compare(a.Arrival, b.Arrival) })
	first := byArrival[0].Arrival
	free := make(timeHeap, k) // when each slot is next free
	for i := range free {
		free[i] = first
	}
	heap.Init(&free)
	var (
		queue   []Job
		waits   []time.Duration
		sumWait time.Duration
		last    time.Duration
		next    int
		busy    time.Duration
	)
	for len(waits) < len(jobs) {
		t := free[0] // the earliest a slot is free
		// Everything that has arrived by then joins the queue; if nothing
		// waits, the slot idles until the next arrival.
		if len(queue) == 0 && next < len(byArrival) && byArrival[next].Arrival > t {
			t = byArrival[next].Arrival
		}
		for next < len(byArrival) && byArrival[next].Arrival <= t {
			queue = append(queue, byArrival[next])
			next++
		}
		best := 0
		for i := 1; i < len(queue); i++ {
			if before(queue[i], queue[best]) {
				best = i
			}
		}
		j := queue[best]
		queue = slices.Delete(queue, best, best+1)
		heap.Pop(&free)
		w := t - j.Arrival
		waits = append(waits, w)
		sumWait += w
		busy += j.Duration
		end := t + j.Duration
		last = max(last, end)
		heap.Push(&free, end)
	}
	res.MeanWait = sumWait / time.Duration(len(jobs))
	res.P99Wait = percentile(waits, 0.99)
	res.Makespan = last - first
	if res.Makespan > 0 {
		res.Util = busy.Seconds() / (float64(k) * res.Makespan.Seconds())
	}
	return res
}

// before is the dispatcher's queue order (store.GPU.ClaimBestJob):
// priority descending, then enqueue time, then id.
func before(a, b Job) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if a.Arrival != b.Arrival {
		return a.Arrival < b.Arrival
	}
	return a.ID < b.ID
}

// timeHeap is a min-heap of times at which slots become free.
type timeHeap []time.Duration

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Duration)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
