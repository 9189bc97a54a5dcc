package gpu

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
	"github.com/baton-cron/baton/shared/schedule"
)

// DefaultTenant is the tenant of a job that names none.
const DefaultTenant = gpumodel.DefaultTenant

// ValidTenant reports whether s is a well-formed tenant name: short, and
// free of the "=" and "," that BATON_GPU_WEIGHTS and BATON_GPU_QUOTAS use
// as separators. The pattern is shared/schedule's, so a schedule's gpu
// target accepts exactly the tenants an enqueue request does.
func ValidTenant(s string) bool { return schedule.ValidGPUTenant(s) }

// Limits of BATON_GPU_WEIGHTS and BATON_GPU_QUOTAS.
const (
	// MaxWeight bounds a tenant's weight: a weight is a ratio, and a
	// bigger number only says a typo.
	MaxWeight = 1000
	// MaxTenantsConfigured bounds how many tenants one variable names.
	MaxTenantsConfigured = 100
)

// ParseShares parses "a=3,b=1" (BATON_GPU_WEIGHTS, BATON_GPU_QUOTAS):
// tenant names with a positive integer each, at most max. name is the
// variable's, for the error. An empty string is an empty map.
func ParseShares(name, s string, maxValue int) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		tenant, v, ok := strings.Cut(item, "=")
		tenant = strings.TrimSpace(tenant)
		if !ok || !ValidTenant(tenant) {
			return nil, fmt.Errorf("%s: %q: want tenant=N, the tenant 1-63 letters, digits and ._- starting with a letter or digit", name, item)
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > maxValue {
			return nil, fmt.Errorf("%s: %q: the value must be an integer from 1 to %d", name, item, maxValue)
		}
		if _, dup := out[tenant]; dup {
			return nil, fmt.Errorf("%s: tenant %q is listed twice", name, tenant)
		}
		out[tenant] = n
		if len(out) > MaxTenantsConfigured {
			return nil, fmt.Errorf("%s: more than %d tenants", name, MaxTenantsConfigured)
		}
	}
	return out, nil
}

// weight is tenant t's weight: 1 unless BATON_GPU_WEIGHTS names it.
func (d *Dispatcher) weight(t string) int {
	if w, ok := d.cfg.Weights[t]; ok && w > 0 {
		return w
	}
	return 1
}

// quota is tenant t's cap on running slots, 0 for none.
func (d *Dispatcher) quota(t string) int { return d.cfg.Quotas[t] }

// pickHead chooses, among the head-of-queue jobs of the tenants that have
// one (heads, at most one per tenant), the job to dispatch next, given
// each tenant's running slots: the tenant furthest below its weighted
// share of the running slots (running/weight smallest; compared as
// running_a*weight_b < running_b*weight_a, so no float rounding), ties
// going to the older head job. A tenant at its quota is skipped. With one
// tenant this is the head job, so the single-tenant order (priority, then
// age) is unchanged. It returns false when every tenant with a head is at
// its quota.
//
// A tenant with nothing queued has no head, so its share goes to the
// others (work-conserving); the rule counts running slots, not history, so
// it lends nothing back later either.
func (d *Dispatcher) pickHead(heads []Job, running map[string]int) (Job, bool) {
	var best Job
	found := false
	for _, h := range heads {
		t := h.TenantOf()
		if q := d.quota(t); q > 0 && running[t] >= q {
			continue
		}
		if !found || d.before(h, best, running) {
			best, found = h, true
		}
	}
	return best, found
}

// before reports whether head a's tenant goes before head b's.
func (d *Dispatcher) before(a, b Job, running map[string]int) bool {
	ta, tb := a.TenantOf(), b.TenantOf()
	if ta != tb {
		l, r := running[ta]*d.weight(tb), running[tb]*d.weight(ta)
		if l != r {
			return l < r
		}
	}
	return queueBefore(a, b)
}

// queueBefore is the queue order within a tenant (store.GPU.QueueHeads):
// higher priority, then older, then the smaller id.
func queueBefore(a, b Job) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ID < b.ID
}

// TenantView is one tenant as GET /gpu/pool shows it.
type TenantView struct {
	Tenant string `json:"tenant"`
	// Queued counts the tenant's queued jobs, up to maxTenantQueuedCounted.
	Queued int64 `json:"queued"`
	// Running counts the slots holding one of its jobs.
	Running int `json:"running"`
	Weight  int `json:"weight"`
	// Quota caps its running slots; 0 for no cap.
	Quota int `json:"quota,omitempty"`
	// Share is its weighted fair share of the pool's slots now: the pool
	// divided by weight among the tenants with a queued or running job,
	// capped by quota. Unused share is lent to the others.
	Share float64 `json:"share"`
}

// tenantViews builds the tenants table from each tenant's queued count
// and running slots.
func (d *Dispatcher) tenantViews(queued map[string]int64, running map[string]int) []TenantView {
	names := map[string]bool{}
	for t := range d.cfg.Weights {
		names[t] = true
	}
	for t := range d.cfg.Quotas {
		names[t] = true
	}
	for t := range queued {
		names[t] = true
	}
	for t := range running {
		names[t] = true
	}
	active := 0
	for t := range names {
		if queued[t] > 0 || running[t] > 0 {
			active += d.weight(t)
		}
	}
	out := make([]TenantView, 0, len(names))
	for t := range names {
		v := TenantView{Tenant: t, Queued: queued[t], Running: running[t], Weight: d.weight(t), Quota: d.quota(t)}
		if active > 0 && (v.Queued > 0 || v.Running > 0) {
			v.Share = float64(len(d.ids)) * float64(v.Weight) / float64(active)
			if v.Quota > 0 && v.Share > float64(v.Quota) {
				v.Share = float64(v.Quota)
			}
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}
