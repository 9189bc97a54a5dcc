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
// one (heads, at most one per tenant), the job to dispatch next: the
// head of the tenant with the smallest usage ÷ weight on the slot's type
// (rank: decayed slot-seconds, the credit cap applied), ties going to the
// queue order. A tenant at its quota (running slots in the whole pool) is
// skipped. With one tenant this is the head job, so the single-tenant
// order (priority, then age) is unchanged; st may then be nil. It returns
// the lift to record with the dispatch (fairState.virtual), and false
// when every tenant with a head is at its quota.
//
// A tenant with nothing queued has no head, so its share goes to the
// others (work-conserving); what they use meanwhile counts as their
// usage, and the credit cap keeps the idle tenant from claiming all of
// it back when it returns.
func (d *Dispatcher) pickHead(heads []Job, st *fairState) (Job, float64, bool) {
	if st == nil {
		var best Job
		for i, h := range heads {
			if i == 0 || queueBefore(h, best) {
				best = h
			}
		}
		return best, 0, len(heads) > 0
	}
	for _, r := range d.rank(heads, st) {
		t := r.head.TenantOf()
		if q := d.quota(t); q > 0 && st.running[t] >= q {
			continue
		}
		return r.head, r.lift, true
	}
	return Job{}, 0, false
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
	// Usage is its decayed slot-seconds over the whole pool
	// (BATON_GPU_FAIR_HALFLIFE), its running jobs included up to now,
	// plus what the credit cap charged it on returning from idle: what
	// fair share compares, divided by Weight.
	Usage float64 `json:"usage"`
	// TargetShare is the fraction of the active tenants' usage (those
	// with a queued or running job) its weight entitles it to:
	// weight ÷ the active tenants' weights. 0 when it is not active.
	TargetShare float64 `json:"targetShare"`
	// Deficit is how many slot-seconds of usage it is owed: TargetShare
	// of the active tenants' usage, minus its own. Positive means it is
	// behind its share, and its jobs go before those of tenants with a
	// smaller deficit per weight; negative means it is ahead, and its
	// jobs wait.
	Deficit float64 `json:"deficit"`
}

// tenantViews builds the tenants table from each tenant's queued count,
// running slots and usage.
func (d *Dispatcher) tenantViews(queued map[string]int64, running map[string]int, usage map[string]float64) []TenantView {
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
	for t, u := range usage {
		if u >= usageFloor {
			names[t] = true
		}
	}
	active := 0
	activeUsage := 0.0
	for t := range names {
		if queued[t] > 0 || running[t] > 0 {
			active += d.weight(t)
			activeUsage += usage[t]
		}
	}
	out := make([]TenantView, 0, len(names))
	for t := range names {
		v := TenantView{Tenant: t, Queued: queued[t], Running: running[t], Weight: d.weight(t), Quota: d.quota(t), Usage: usage[t]}
		if active > 0 && (v.Queued > 0 || v.Running > 0) {
			v.Share = float64(len(d.ids)) * float64(v.Weight) / float64(active)
			if v.Quota > 0 && v.Share > float64(v.Quota) {
				v.Share = float64(v.Quota)
			}
			v.TargetShare = float64(v.Weight) / float64(active)
			v.Deficit = v.TargetShare*activeUsage - v.Usage
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Tenant < out[j].Tenant })
	return out
}
