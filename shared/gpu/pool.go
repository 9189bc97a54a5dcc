package gpu

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Worker is one worker service: a base URL and how many jobs it can run at
// once (Cloud Run: max instances × concurrency 1).
type Worker struct {
	URL   string `json:"url"`
	Slots int    `json:"slots"`
}

// Pool is the configured set of workers.
type Pool []Worker

// MaxSlotsPerWorker bounds one entry, so a typo cannot create a million
// slot documents.
const MaxSlotsPerWorker = 1000

// ParsePool parses "URL=slots,URL=slots" (BATON_GPU_POOL). A URL without
// "=slots" has one slot. An empty string is an empty pool: jobs queue but
// nothing runs them.
func ParsePool(s string) (Pool, error) {
	var p Pool
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		raw, n := item, 1
		if i := strings.LastIndex(item, "="); i >= 0 {
			var err error
			raw = item[:i]
			n, err = strconv.Atoi(strings.TrimSpace(item[i+1:]))
			if err != nil || n < 1 || n > MaxSlotsPerWorker {
				return nil, fmt.Errorf("%w: %q: slots must be an integer from 1 to %d", ErrBadPool, item, MaxSlotsPerWorker)
			}
		}
		raw = strings.TrimRight(strings.TrimSpace(raw), "/")
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: %q: want an http(s) URL such as https://gpu-worker-abc.a.run.app=3", ErrBadPool, item)
		}
		if seen[raw] {
			return nil, fmt.Errorf("%w: %q is listed twice", ErrBadPool, raw)
		}
		seen[raw] = true
		p = append(p, Worker{URL: raw, Slots: n})
	}
	return p, nil
}

// String renders the pool in ParsePool's format.
func (p Pool) String() string {
	parts := make([]string, len(p))
	for i, w := range p {
		parts[i] = fmt.Sprintf("%s=%d", w.URL, w.Slots)
	}
	return strings.Join(parts, ",")
}

// SlotID names slot i of worker w. The URL is part of the id, so changing
// the pool's order keeps each slot's history, and a removed worker's slots
// are simply never claimed again.
func SlotID(workerURL string, i int) string { return fmt.Sprintf("%s#%d", workerURL, i) }

// slotIDs lists every slot id of the pool, in order.
func (p Pool) slotIDs() []string {
	var ids []string
	for _, w := range p {
		for i := 0; i < w.Slots; i++ {
			ids = append(ids, SlotID(w.URL, i))
		}
	}
	return ids
}
