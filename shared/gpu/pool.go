package gpu

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/baton-cron/baton/shared/schedule"
)

// Worker is one worker service: a base URL and how many jobs it can run at
// once (Cloud Run: max instances × concurrency 1).
type Worker struct {
	URL   string `json:"url"`
	Slots int    `json:"slots"`
	// Type is the GPU type of every slot of this worker ("nvidia-l4"),
	// which a job's gpuType must match; "" for an untyped worker, which
	// only takes jobs that ask for no type.
	Type string `json:"type,omitempty"`
}

// ValidGPUType reports whether s is a well-formed GPU type name, as Cloud
// Run spells accelerators (nvidia-l4, nvidia-rtx-pro-6000). The pattern is
// shared/schedule's, so a schedule's gpu target accepts exactly the types
// an enqueue request and BATON_GPU_POOL do.
func ValidGPUType(s string) bool { return schedule.ValidGPUType(s) }

// Pool is the configured set of workers.
type Pool []Worker

// MaxSlotsPerWorker bounds one entry, so a typo cannot create a million
// slot documents.
const MaxSlotsPerWorker = 1000

// ParsePool parses "URL=slots@type,URL=slots" (BATON_GPU_POOL). A URL
// without "=slots" has one slot; "@type" (after the slots, or after the
// URL: "URL@nvidia-l4") names the GPU type of its slots, and without it
// the slots are untyped. An empty string is an empty pool: jobs queue but
// nothing runs them.
func ParsePool(s string) (Pool, error) {
	var p Pool
	seen := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		raw, n, typ := item, 1, ""
		// The type comes last, after an "@" that is not part of the URL's
		// authority (userinfo@host would come before the host's end).
		if i := strings.LastIndex(item, "@"); i >= 0 && !strings.Contains(item[i:], "/") {
			typ = strings.TrimSpace(item[i+1:])
			if !ValidGPUType(typ) {
				return nil, fmt.Errorf("%w: %q: the type after @ must be lower-case letters, digits and - such as nvidia-l4", ErrBadPool, item)
			}
			item = item[:i]
			raw = item
		}
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
		p = append(p, Worker{URL: raw, Slots: n, Type: typ})
	}
	return p, nil
}

// String renders the pool in ParsePool's format.
func (p Pool) String() string {
	parts := make([]string, len(p))
	for i, w := range p {
		parts[i] = fmt.Sprintf("%s=%d", w.URL, w.Slots)
		if w.Type != "" {
			parts[i] += "@" + w.Type
		}
	}
	return strings.Join(parts, ",")
}

// SlotID names slot i of worker w. The URL is part of the id, so changing
// the pool's order keeps each slot's history, and a removed worker's slots
// are simply never claimed again.
func SlotID(workerURL string, i int) string { return fmt.Sprintf("%s#%d", workerURL, i) }

// Types lists the pool's GPU types, each once, in the pool's order.
func (p Pool) Types() []string {
	var types []string
	seen := map[string]bool{}
	for _, w := range p {
		if w.Type != "" && !seen[w.Type] {
			seen[w.Type] = true
			types = append(types, w.Type)
		}
	}
	return types
}

// HasType reports whether some worker of the pool has GPU type t.
func (p Pool) HasType(t string) bool {
	for _, w := range p {
		if w.Type == t {
			return true
		}
	}
	return false
}

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
