package emutest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/storage"

	"github.com/baton-cron/baton/emulator/gcs"
)

var (
	gcsOnce sync.Once
	gcsSrv  *gcs.Server
	gcsErr  error
)

// GCSServer returns the package-wide GCS emulator, starting it on first use.
// It lives until the test binary exits. It is strict (GCS's per-object
// write rate is enforced) unless EnvLax (BATON_EMULATOR_LAX=1), the switch
// every test emulator honours, for debugging only.
func GCSServer(t testing.TB) *gcs.Server {
	t.Helper()
	gcsOnce.Do(func() {
		gcsSrv, gcsErr = gcs.Start(context.Background(), gcs.Options{Lax: Lax(), Logger: laxLogger()})
	})
	if gcsErr != nil {
		t.Fatalf("emutest: start gcs emulator: %v", gcsErr)
	}
	return gcsSrv
}

// BucketName returns a valid bucket name unique to this test.
func BucketName(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, t.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	return "t-" + strings.Trim(name, "-") + "-" + hex.EncodeToString(b[:])
}

// GCS returns a real storage client pointed at the package-wide emulator and
// a fresh bucket for this test. The client is closed when the test ends.
func GCS(t testing.TB) (*storage.Client, string) {
	t.Helper()
	return gcsBucket(t, GCSServer(t))
}

var (
	simOnce sync.Once
	simSrv  *gcs.Server
	simErr  error
)

// SimulatedTimeGCS is GCS on a second package-wide emulator that does not
// limit the per-object write rate, for tests that drive leases in
// simulated time: Cloud Storage's one write a second per object is a real
// second, and a test that runs an hour of ticks in a few seconds of wall
// time would be held to sixty times the real rate (a minute's three tick
// leases a real second apart: three minutes for TestExactlyOnce). Every
// other rule of the emulator applies. Pair it with
// lease.Options{ObjectWriteGap: -1}. The rate itself is proven by the tests
// that run on the wall clock (emulator/gcs, shared/lease, the every-second
// schedule in shared/scheduler, and the end-to-end tests).
func SimulatedTimeGCS(t testing.TB) (*storage.Client, string) {
	t.Helper()
	simOnce.Do(func() {
		simSrv, simErr = gcs.Start(context.Background(), gcs.Options{Lax: true})
	})
	if simErr != nil {
		t.Fatalf("emutest: start gcs emulator: %v", simErr)
	}
	return gcsBucket(t, simSrv)
}

// gcsBucket makes a fresh bucket for this test on srv and a client for it.
func gcsBucket(t testing.TB, srv *gcs.Server) (*storage.Client, string) {
	t.Helper()
	ctx := context.Background()
	bucket := BucketName(t)
	if err := srv.CreateBucket(ctx, bucket); err != nil {
		t.Fatalf("emutest: create bucket: %v", err)
	}
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatalf("emutest: gcs client: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, bucket
}

// laxLogger is where a lax emulator says that it is lax: stderr, warnings
// only, so that a test run in lax mode shows it.
func laxLogger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
