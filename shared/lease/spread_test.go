package lease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/storage"

	"github.com/baton-cron/baton/shared/lease"
)

// TestJobLeasesSpreadOverHashDirectories: a job lease lives under a
// two-hex-digit directory from a hash of its name, so sequential schedule
// ids do not write one range of the bucket's index
// (https://cloud.google.com/storage/docs/request-rate); 64 sequential ids
// land in many directories. Other leases (tick) keep their flat name, and
// List and Status give the lease's own name back with the object it lives
// in.
func TestJobLeasesSpreadOverHashDirectories(t *testing.T) {
	t.Parallel()
	b := setup(t)
	m := b.manager("a", lease.Options{ObjectWriteGap: -1})
	ctx := context.Background()
	dirs := map[string]bool{}
	for i := range 64 {
		name := fmt.Sprintf("job-sched-%04d", i)
		obj := m.ObjectName(name)
		dir := lease.SpreadDir(name)
		if obj != "leases/"+dir+name+".json" || len(dir) != 3 {
			t.Fatalf("%s lives at %s; want leases/hh/%s.json", name, obj, name)
		}
		dirs[dir] = true
	}
	if len(dirs) < 32 {
		t.Errorf("64 sequential job leases fall in %d directories; want them spread", len(dirs))
	}
	if got := m.ObjectName("tick"); got != "leases/tick.json" {
		t.Errorf("the tick lease lives at %s; want leases/tick.json", got)
	}

	l, err := m.Acquire(ctx, "job-x", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.bucket.Object(m.ObjectName("job-x")).Attrs(ctx); err != nil {
		t.Errorf("the lease object %s: %v", m.ObjectName("job-x"), err)
	}
	infos, err := m.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "job-x" || infos[0].Object != m.ObjectName("job-x") || infos[0].Free {
		t.Errorf("List = %+v; want job-x alone (its retired legacy object hidden), held, at %s", infos, m.ObjectName("job-x"))
	}
	if i, err := m.Status(ctx, "job-x"); err != nil || i.Holder != "a" {
		t.Errorf("Status = %+v, %v; want held by a", i, err)
	}
	release(t, l)
}

// TestUpgradeKeepsExclusionWithAnOlderProcess is the upgrade: processes of
// the version before the spread (Options.Flat) take job leases at
// leases/job-<id>.json, the new version at leases/hh/job-<id>.json. While an
// older process holds the flat object, the new version is refused (the
// run waits); once it is free, the new version retires it with a tombstone
// and starts above its epoch; from then on the older process is refused,
// forever, and so never holds the lease beside the new one.
func TestUpgradeKeepsExclusionWithAnOlderProcess(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	old := b.manager("old", lease.Options{Flat: true})
	cur := b.manager("new", lease.Options{})
	const name = "job-upgrade"
	if got := old.ObjectName(name); got != "leases/"+name+".json" {
		t.Fatalf("the older layout keeps %s at %s", name, got)
	}

	held, err := old.Acquire(ctx, name, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var he *lease.HeldError
	if _, err := cur.Acquire(ctx, name, 10*time.Second); !errors.As(err, &he) || he.Holder != "old" {
		t.Fatalf("new version while the older one holds the flat object: %v; want held by old", err)
	}
	// The sweep asks Status whether a run's executor still holds its
	// lease: an older process's hold counts.
	if i, err := cur.Status(ctx, name); err != nil || i.Holder != "old" || i.Object != "leases/"+name+".json" {
		t.Errorf("Status while the older version holds: %+v, %v; want held by old at the flat object", i, err)
	}
	oldEpoch := held.Epoch()
	release(t, held)

	l, err := cur.Acquire(ctx, name, 10*time.Second)
	if err != nil {
		t.Fatalf("new version after the older one released: %v", err)
	}
	if l.Epoch() <= oldEpoch {
		t.Errorf("new epoch %d; want above the older holder's %d, so its fences are refused", l.Epoch(), oldEpoch)
	}
	if _, err := old.Acquire(ctx, name, 10*time.Second); !errors.As(err, &he) || he.Holder != lease.TombstoneHolder {
		t.Errorf("older version while the new one holds: %v; want held by the tombstone", err)
	}
	release(t, l)
	// Free at the new name, the flat object still refuses the older
	// version: it is retired for good, not only while the new one holds.
	if _, err := old.Acquire(ctx, name, 10*time.Second); !errors.As(err, &he) || he.Holder != lease.TombstoneHolder {
		t.Errorf("older version after the new one released: %v; want held by the tombstone", err)
	}
	if _, err := cur.Status(ctx, name); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Status after the new version released: %v; want free (the tombstone is no holder)", err)
	}
	again, err := cur.Acquire(ctx, name, 10*time.Second)
	if err != nil {
		t.Fatalf("new version again: %v", err)
	}
	release(t, again)
}

// TestUpgradeRetiresAFlatObjectNobodyWrote: a job lease that no older
// process ever took still gets its tombstone at the first acquire, so an
// older process that starts on it during the upgrade finds it held; a
// deleted spread object (a break, a lifecycle rule) does not bring the
// flat one back.
func TestUpgradeRetiresAFlatObjectNobodyWrote(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	old := b.manager("old", lease.Options{Flat: true, ObjectWriteGap: -1})
	cur := b.manager("new", lease.Options{ObjectWriteGap: -1})
	const name = "job-fresh"
	l, err := cur.Acquire(ctx, name, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	release(t, l)
	var he *lease.HeldError
	if _, err := old.Acquire(ctx, name, 10*time.Second); !errors.As(err, &he) {
		t.Fatalf("older version on a lease the new one created: %v; want held", err)
	}
	if err := b.bucket.Object(cur.ObjectName(name)).Delete(ctx); err != nil {
		t.Fatal(err)
	}
	l, err = cur.Acquire(ctx, name, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	release(t, l)
	a, err := b.bucket.Object("leases/" + name + ".json").Attrs(ctx)
	if err != nil || a.Metadata["baton-holder"] != lease.TombstoneHolder {
		t.Errorf("flat object after the spread one was recreated: %v %v; want the tombstone", a, err)
	}
	if _, err := b.bucket.Object("leases/" + name + ".json").Attrs(ctx); errors.Is(err, storage.ErrObjectNotExist) {
		t.Error("the tombstone is gone")
	}
}
