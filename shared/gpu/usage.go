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

// slotOffsets is slot s's offsets (gpumodel.Slot.Offsets) at now.
func (d *Dispatcher) slotOffsets(s Slot, now time.Time) map[string]float64 {
	out := map[string]float64{}
	k := d.decay(now.Sub(s.UsageAt))
	for _, o := range s.Offsets {
		out[o.Tenant] = max(out[o.Tenant], o.Seconds*k)
	}
	return out
}

// linkUsage is what the fill linking tenant's job to slot records
// (LinkSlot): the slot's usage and offsets at now, its previous hold
// folded in, and, when the credit cap charged the tenant (offset > 0),
// the tenant's whole offset after that charge; sorted by tenant and
// without the entries that decayed away.
func (d *Dispatcher) linkUsage(s Slot, tenant string, offset float64, now time.Time) gpumodel.SlotUsage {
	offsets := d.slotOffsets(s, now)
	if offset > 0 {
		offsets[tenant] = max(offsets[tenant], offset)
	}
	usage := d.slotUsage(s, now)
	var holds []gpumodel.TenantUsage
	for _, h := range s.Holds {
		if h.Tenant != s.LinkedTenant && usage[h.Tenant] >= usageFloor {
			holds = append(holds, h)
		}
	}
	if start, end, ok := holdSpan(s, now); ok {
		holds = append(holds, gpumodel.TenantUsage{Tenant: s.LinkedTenant, Seconds: end.Sub(start).Seconds(), At: end})
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].Tenant < holds[j].Tenant })
	return gpumodel.SlotUsage{Usage: usageList(usage), Offsets: usageList(offsets), Holds: holds, At: now}
}

// holdSpan is slot s's latest hold at now: from LinkedAt to FreedAt, or
// to now while open. ok is false when the slot has no hold on record.
func holdSpan(s Slot, now time.Time) (start, end time.Time, ok bool) {
	if s.LinkedTenant == "" || s.LinkedAt.IsZero() {
		return time.Time{}, time.Time{}, false
	}
	if !s.FreedAt.IsZero() && !s.FreedAt.Before(s.LinkedAt) {
		return s.LinkedAt, s.FreedAt, true
	}
	return s.LinkedAt, now, true
}

// usageList is m as the slot stores it: sorted, without the entries that
// decayed below usageFloor.
func usageList(m map[string]float64) []gpumodel.TenantUsage {
	list := make([]gpumodel.TenantUsage, 0, len(m))
	for t, v := range m {
		if v >= usageFloor {
			list = append(list, gpumodel.TenantUsage{Tenant: t, Seconds: v})
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Tenant < list[j].Tenant })
	return list
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
	// filled slot's hold that just ended included, plus its offset: what
	// fair share compares.
	usage map[string]float64
	// offset is each tenant's offset on those slots (the largest).
	offset map[string]float64
	// lastHeld is when each tenant last held one of those slots, as far
	// as the slots' latest holds tell: now for a hold still open (the
	// filled slot's, whose job just ended, included).
	lastHeld map[string]time.Time
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
	st := &fairState{now: now, running: map[string]int{}, typeRunning: map[string]int{}, usage: map[string]float64{}, offset: map[string]float64{}, lastHeld: map[string]time.Time{}}
	for _, s := range slots {
		sameType := d.types[s.ID] == typ
		if sameType {
			st.slots++
			for t, u := range d.slotUsage(s, now) {
				st.usage[t] += u
			}
			for t, o := range d.slotOffsets(s, now) {
				st.offset[t] = max(st.offset[t], o)
			}
			if _, end, ok := holdSpan(s, now); ok && end.After(st.lastHeld[s.LinkedTenant]) {
				st.lastHeld[s.LinkedTenant] = end
			}
			for _, h := range s.Holds {
				if h.At.After(st.lastHeld[h.Tenant]) {
					st.lastHeld[h.Tenant] = h.At
				}
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
	for t, o := range st.offset {
		st.usage[t] += o
	}
	d.reserve(st, slots, except, typ)
	return st
}

// reserve charges each job running on a slot of type typ (but the one
// being filled, whose job ended) at least its tenant's expected hold:
// the mean of the tenant's last finished holds on those slots
// (gpumodel.Slot.Holds). A stride scheduler charges a whole stride when
// it selects a client; without this, a job just started counts nothing
// yet, and fills that decide together (completions answered at once)
// would all give their slots to the tenant it belongs to. The hold's
// real length replaces the guess as it runs and when it ends.
func (d *Dispatcher) reserve(st *fairState, slots []Slot, except, typ string) {
	sum, n := map[string]float64{}, map[string]int{}
	for _, s := range slots {
		if d.types[s.ID] != typ {
			continue
		}
		for _, h := range s.Holds {
			sum[h.Tenant] += h.Seconds
			n[h.Tenant]++
		}
	}
	for _, s := range slots {
		if s.ID == except || d.types[s.ID] != typ || s.JobID == "" {
			continue
		}
		start, end, ok := holdSpan(s, st.now)
		if !ok || !end.Equal(st.now) || n[s.LinkedTenant] == 0 {
			continue // no open hold, or nothing to guess from
		}
		if left := sum[s.LinkedTenant]/float64(n[s.LinkedTenant]) - st.now.Sub(start).Seconds(); left > 0 {
			st.usage[s.LinkedTenant] += left
		}
	}
}

// virtual is head h's tenant's usage ÷ weight as fair share compares it
// (a stride scheduler's pass), and offset, the tenant's whole offset
// after the credit cap's charge (0 for no charge), to record with the
// dispatch.
//
// The credit cap: a tenant that has held no slot of the type since its
// head job was queued comes back from idle, rather than waiting its turn
// in a backlog it is being served from. It starts no lower than the
// least-served tenant holding a slot of the type (ref), as a stride
// scheduler sets a rejoining client's pass to the global pass: what the
// others used while it had nothing queued is not owed back, or it would
// hold every slot until its usage caught up. A tenant queued all along
// keeps every second of credit its wait earned. The charge is recorded
// with the dispatch as the tenant's whole offset (its earlier one plus
// this charge), so the tenant's next choice starts from the capped
// value, and fills that charge it at once, each from the same read,
// charge it once (the largest offset counts, not their sum).
func (st *fairState) virtual(h Job, w int, ref float64, haveRef bool) (v, offset float64) {
	t := h.TenantOf()
	v = st.usage[t] / float64(w)
	if !haveRef || st.typeRunning[t] > 0 || !st.lastHeld[t].Before(h.CreatedAt) || v >= ref {
		return v, 0
	}
	return ref, st.offset[t] + (ref-v)*float64(w)
}

// ranked is the heads in fair-share order, each with its virtual usage
// and offset to record (virtual): smallest usage ÷ weight first, then the
// queue order.
type ranked struct {
	head Job
	v    float64
	lift float64
}

// rank orders heads by fair share at st (see virtual).
func (d *Dispatcher) rank(heads []Job, st *fairState) []ranked {
	ref, haveRef := 0.0, false
	for t, n := range st.typeRunning {
		if n == 0 {
			continue
		}
		if v := st.usage[t] / float64(d.weight(t)); !haveRef || v < ref {
			ref, haveRef = v, true
		}
	}
	out := make([]ranked, len(heads))
	for i, h := range heads {
		v, lift := st.virtual(h, d.weight(h.TenantOf()), ref, haveRef)
		out[i] = ranked{head: h, v: v, lift: lift}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.head.TenantOf() != b.head.TenantOf() {
			if a.v != b.v {
				return a.v < b.v
			}
			// A tenant back from idle starts level with the
			// least-served one and goes first: it waited.
			if (a.lift > 0) != (b.lift > 0) {
				return a.lift > 0
			}
		}
		return queueBefore(a.head, b.head)
	})
	return out
}
