package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-cron/baton/emulator/gcs"
	"github.com/baton-cron/baton/shared/lease"
)

// Run takes the lease, runs the function with a context that dies if the
// lease is lost, and releases it. A second runner finds the lease held.
func ExampleRun() {
	ctx := context.Background()
	srv, err := gcs.Start(ctx, gcs.Options{})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	_ = srv.CreateBucket(ctx, "example")
	client, err := srv.Client(ctx)
	if err != nil {
		panic(err)
	}
	defer client.Close()

	m := lease.NewManager(client.Bucket("example"), "leases/", lease.Options{Holder: "runner-1"})
	other := lease.NewManager(client.Bucket("example"), "leases/", lease.Options{Holder: "runner-2"})
	err = lease.Run(ctx, m, "tick", 30*time.Second, func(ctx context.Context, l *lease.Lease) error {
		fmt.Println("holder", l.Holder(), "epoch", l.Epoch(), "fence", l.Fence().Epoch)
		err := lease.Run(ctx, other, "tick", 30*time.Second, func(context.Context, *lease.Lease) error { return nil })
		var held *lease.HeldError
		if errors.As(err, &held) {
			fmt.Println("runner-2: held by", held.Holder)
		}
		return nil
	})
	fmt.Println("run:", err)
	_, err = m.Status(ctx, "tick")
	fmt.Println("after:", errors.Is(err, lease.ErrNotFound))
	// Output:
	// holder runner-1 epoch 1 fence 1
	// runner-2: held by runner-1
	// run: <nil>
	// after: true
}
