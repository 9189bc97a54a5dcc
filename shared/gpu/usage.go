package gpu

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/baton-cron/baton/shared/gpu/gpumodel"
)

// Fair share by usage over time (docs/gpu.md, "Fair share"). Each tenant's
// usage is the slot-seconds its jobs held the pool's slots, each second
// weighing 2^(-age/half-life): a job that ran an hour ago (at the default
// half-life) counts half as much as one running now. A freed slot goes to
// the tenant with the smallest usage ÷ weight among those with a queued
// job its type can run, counted on the slots of that type.
//
// The usage lives on the slot documents (gpumodel.Slot): every slot keeps
// each tenant's decayed slot-seconds on it, and the hold running now. The
// dispatcher sums them from the read of the slot documents that counting
// the running slots already costs, and the fill that links a slot's next
// job folds the finished hold into the slot's usage in the link's own
// fenced write, from the document the slot's claim returned. So any
// dispatcher instance, and a restart, sees the same numbers, and keeping
// them costs no read or write a hand-off did not already make.

// Fair-share defaults and bounds.
const (
	// DefaultFairHalfLife is BATON_GPU_FAIR_HALFLIFE's default: usage an
	// hour old counts half. Shorter forgets sooner, so a burst is forgiven
	// sooner, and a tenant whose jobs are rare is compared on less
	// history; longer holds a heavy user back for longer (docs/gpu.md).
	DefaultFairHalfLife = time.Hour
	// MinFairHalfLife and MaxFairHalfLife bound BATON_GPU_FAIR_HALFLIFE.
	MinFairHalfLife = time.Second
	MaxFairHalfLife = 30 * 24 * time.Hour
	// usageFloor is the smallest usage a slot keeps for a tenant, in
	// slot-seconds: below it a tenant's entry is dropped, so a slot's list
	// holds the tenants of the last few half-lives, not every tenant ever.
	usageFloor = 0.01
)

// ParseHalfLife parses BATON_GPU_FAIR_HALFLIFE ("1h", "20m"); "" is
// DefaultFairHalfLife. name is the variable's, for the error.
func ParseHalfLife(name, s string) (time.Duration, error) {
	if s == "" {
		return DefaultFairHalfLife, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < MinFairHalfLife || d > MaxFairHalfLife {
		return 0, fmt.Errorf("%s: %q: want a duration from %s to %s, such as 1h", name, s, MinFairHalfLife, MaxFairHalfLife)
	}
	return d, nil
}

// decay is the weight of a slot-second age old: 2^(-age/half-life).
func (d *Dispatcher) decay(age time.Duration) float64 {
	if age <= 0 {
		return 1
	}
	return math.Exp2(-age.Seconds() / d.cfg.FairHalfLife.Seconds())
}

// heldUsage is a hold from start to end, as decayed slot-seconds at now:
// the integral of 2^(-(now-t)/h) over [start, end], so a long job's early
// hours have decayed by the time it ends, as if it had been charged
// second by second.
func (d *Dispatcher) heldUsage(start, end, now time.Time) float64 {
	if !end.After(start) {
		return 0
	}
	h := d.cfg.FairHalfLife.Seconds()
	return h / math.Ln2 * (d.decay(now.Sub(end)) - d.decay(now.Sub(start)))
}

// slotUsage is each tenant's usage on slot s at now: its recorded usage
// decayed from UsageAt, plus its hold since LinkedAt, ended at FreedAt or
// still running. A slot held past its release without one (its holder
// died) counts as held: the slot was unusable meanwhile.
func (d *Dispatcher) slotUsage(s Slot, now time.Time) map[string]float64 {
	out := map[string]float64{}
	k := d.decay(now.Sub(s.UsageAt))
	for _, u := range s.Usage {
		out[u.Tenant] += u.Seconds * k
	}
	if s.LinkedTenant != "" && !s.LinkedAt.IsZero() {
		end := now
		if !s.FreedAt.IsZero() && !s.FreedAt.Before(s.LinkedAt) && s.FreedAt.Before(now) {
			end = s.FreedAt
		}
		out[s.LinkedTenant] += d.heldUsage(s.LinkedAt, end, now)
	}
	return out
}

// linkUsage is what the fill linking tenant's job to slot records
// (LinkSlot): the slot's usage at now, its previous hold folded in, plus
// lift, the credit cap's charge to the tenant (fairState.pick), sorted by
// tenant and without the entries that decayed away.
func (d *Dispatcher) linkUsage(s Slot, tenant string, lift float64, now time.Time) gpumodel.SlotUsage {
	u := d.slotUsage(s, now)
	if lift > 0 {
		u[tenant] += lift
	}
	list := make([]gpumodel.TenantUsage, 0, len(u))
	for t, v := range u {
		if v >= usageFloor {
			list = append(list, gpumodel.TenantUsage{Tenant: t, Seconds: v})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Tenant < list[j].Tenant })
	return gpumodel.SlotUsage{Usage: list, At: now}
}

// fairState is what a fill chooses by, from one read of the slot
// documents: each tenant's running slots in the whole pool (quotas), and
// its usage and running slots on the slots of the type being filled.
type fairState struct {
	now time.Time
	// running counts each tenant's slots in the pool, but for the one
	// being filled (see Dispatcher.running).
	running map[string]int
	// typeRunning is running on the slots of the filled slot's type.
	typeRunning map[string]int
	// usage is each tenant's decayed slot-seconds on those slots, the
	// filled slot's hold that just ended included.
	usage map[string]float64
	// slots is how many slots the type has.
	slots int
}

// readFair reads the slot documents once and builds the fair state for
// filling slotID (except: it is being filled; "" for none, as the pool
// view and preemption ask).
func (d *Dispatcher) readFair(ctx context.Context, slotID string) (*fairState, error) {
	slots, err := d.q.Slots(ctx, d.ids)
	if err != nil {
		return nil, fmt.Errorf("read slots: %w", err)
	}
	return d.fairFrom(slots, slotID, d.types[slotID]), nil
}

// fairFrom builds the fair state from the slot documents, for the slots
// of GPU type typ, except being the slot being filled.
func (d *Dispatcher) fairFrom(slots []Slot, except, typ string) *fairState {
	now := d.cfg.Clock.Now()
	st := &fairState{now: now, running: map[string]int{}, typeRunning: map[string]int{}, usage: map[string]float64{}}
	for _, s := range slots {
		sameType := d.types[s.ID] == typ
		if sameType {
			st.slots++
			for t, u := range d.slotUsage(s, now) {
				st.usage[t] += u
			}
		}
		if s.ID == except || (s.JobID == "" && (s.Tenant == "" || !s.LeaseUntil.After(now))) {
			continue
		}
		t := s.Tenant
		if t == "" {
			t = DefaultTenant // linked before slots carried the tenant
		}
		st.running[t]++
		if sameType {
			st.typeRunning[t]++
		}
	}
	return st
}

// virtual is head h's tenant's usage ÷ weight as fair share compares it
// (a stride scheduler's pass), and lift, the slot-seconds the credit cap
// adds to the tenant's usage when its job is dispatched.
//
// The credit cap: a tenant that holds no slot of the type may not be
// further below the least-served tenant that holds one (ref) than it
// could have fallen behind while its head job waited: the type's slots
// over that wait, per unit of the weight of the tenants holding or
// queueing for them (active). A tenant back from idle thus starts level
// with those that kept the pool busy meanwhile, as a stride scheduler
// sets a rejoining client's pass to the global pass, instead of holding
// every slot until its lower usage catches up; a tenant that was queued
// all along keeps every second of credit its wait earned. The lift is
// recorded with the dispatch, so the tenant's next choice starts from the
// capped value.
func (st *fairState) virtual(h Job, w int, ref, active float64, haveRef bool) (v, lift float64) {
	t := h.TenantOf()
	v = st.usage[t] / float64(w)
	if !haveRef || st.typeRunning[t] > 0 || active <= 0 {
		return v, 0
	}
	waited := st.now.Sub(h.CreatedAt).Seconds()
	if waited < 0 {
		waited = 0
	}
	if floor := ref - float64(st.slots)*waited/active; v < floor {
		return floor, (floor - v) * float64(w)
	}
	return v, 0
}

// ranked is the heads in fair-share order, each with its virtual usage
// and lift: smallest usage ÷ weight first, then the queue order.
type ranked struct {
	head Job
	v    float64
	lift float64
}

// rank orders heads by fair share at st (see virtual).
func (d *Dispatcher) rank(heads []Job, st *fairState) []ranked {
	ref, haveRef := 0.0, false
	active := map[string]bool{}
	for t, n := range st.typeRunning {
		if n == 0 {
			continue
		}
		active[t] = true
		if v := st.usage[t] / float64(d.weight(t)); !haveRef || v < ref {
			ref, haveRef = v, true
		}
	}
	for _, h := range heads {
		active[h.TenantOf()] = true
	}
	activeWeight := 0.0
	for t := range active {
		activeWeight += float64(d.weight(t))
	}
	out := make([]ranked, len(heads))
	for i, h := range heads {
		v, lift := st.virtual(h, d.weight(h.TenantOf()), ref, activeWeight, haveRef)
		out[i] = ranked{head: h, v: v, lift: lift}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.head.TenantOf() != b.head.TenantOf() && a.v != b.v {
			return a.v < b.v
		}
		return queueBefore(a.head, b.head)
	})
	return out
}
