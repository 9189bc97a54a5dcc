package gcs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"

	"github.com/baton-cron/baton/shared/clock"
	"github.com/baton-cron/baton/shared/httpapi"
)

// Options configures Start.
type Options struct {
	// Addr is the listen address; default 127.0.0.1:0 (a free port).
	Addr string
	// Logger receives the emulator's own logs; nil discards them.
	Logger *slog.Logger
	// Dir keeps the objects in this directory (fake-gcs-server's
	// filesystem backend), so leases, their epochs and job outputs survive
	// a restart of the stack; "" keeps them in memory.
	Dir string
	// Lax turns off the per-object write rate limit (rate.go) that real
	// GCS enforces and the emulator enforces by default. For debugging
	// only: code that passes lax may get 429 on GCS. Start logs it.
	Lax bool
	// Clock drives the write-rate token buckets; nil means the wall
	// clock. Tests inject one to refill a bucket without sleeping.
	Clock clock.Clock
}

// Server is a running GCS emulator.
type Server struct {
	fake  *fakestorage.Server
	front *front
	srv   *http.Server
	ln    net.Listener
	host  string
	log   *slog.Logger
	done  chan struct{}
}

// Start runs fake-gcs-server in-process behind the precondition front and
// returns once it accepts connections.
func Start(ctx context.Context, o Options) (*Server, error) {
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gcs emulator: listen %s: %w", addr, err)
	}
	host := ln.Addr().String()
	// NoListener: we serve fake-gcs-server's handler ourselves, behind the
	// front. PublicHost is our address so XML-API reads
	// (GET /bucket/object, the Go client's default for downloads) route to
	// downloadObject; ExternalURL makes resumable-upload Locations point at us.
	fake, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme:      "http",
		NoListener:  true,
		PublicHost:  host,
		ExternalURL: "http://" + host,
		StorageRoot: o.Dir,
	})
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("gcs emulator: start fake-gcs-server: %w", err)
	}
	s := &Server{fake: fake, ln: ln, host: host, log: log, done: make(chan struct{})}
	// No Write timeout: a download of a large job output may take a while.
	s.front = newFront(fake, log, !o.Lax, clock.Or(o.Clock).Now)
	if o.Lax {
		log.Warn("gcs emulator: lax mode: the per-object write rate limit (one write per second per object) is not enforced; real GCS answers 429 where this does not")
	}
	s.srv = httpapi.NewServer(s.front, httpapi.DefaultTimeouts)
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("gcs emulator: serve", "err", err)
		}
	}()
	log.Debug("gcs emulator: listening", "host", host)
	return s, nil
}

// Host returns "127.0.0.1:PORT", the value for STORAGE_EMULATOR_HOST.
func (s *Server) Host() string { return s.host }

// URL returns "http://127.0.0.1:PORT".
func (s *Server) URL() string { return "http://" + s.host }

// ClientOptions returns the options that point a cloud.google.com/go/storage
// client at this emulator without credentials. Append
// option.WithHTTPClient to route requests through a test transport.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.URL() + "/storage/v1/"),
		option.WithoutAuthentication(),
	}
}

// Client returns a real cloud.google.com/go/storage client pointed at the
// emulator. It does not depend on STORAGE_EMULATOR_HOST being set.
func (s *Server) Client(ctx context.Context) (*storage.Client, error) {
	c, err := storage.NewClient(ctx, s.ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("gcs emulator: client: %w", err)
	}
	return c, nil
}

// CreateBucket creates a bucket; creating one that exists is a no-op.
func (s *Server) CreateBucket(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("gcs emulator: create bucket %q: %w", name, err)
	}
	if name == "" {
		return errors.New("gcs emulator: create bucket: empty name")
	}
	s.fake.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	return nil
}

// ObjectWrites returns how many writes (creates, overwrites, metadata
// updates, deletes) the emulator applied to one object, and how many it
// refused with 429 rateLimitExceeded. Tests use it to check that a caller
// stays inside Cloud Storage's per-object write rate.
func (s *Server) ObjectWrites(bucket, object string) (applied, refused int64) {
	key := rateKey(bucket, object)
	s.front.rate.mu.Lock()
	defer s.front.rate.mu.Unlock()
	return s.front.rate.writes[key], s.front.rate.refused[key]
}

// ObjectWriteTimes returns when the emulator applied the last writes to
// one object (up to 256, oldest first), on its clock. The 429 limiter lets
// a burst of two through after a quiet second, as Cloud Storage may, so a
// test that a caller itself keeps one write a second apart reads the
// spacing here rather than waiting for a refusal.
func (s *Server) ObjectWriteTimes(bucket, object string) []time.Time {
	key := rateKey(bucket, object)
	s.front.rate.mu.Lock()
	defer s.front.rate.mu.Unlock()
	return slices.Clone(s.front.rate.times[key])
}

// Ops returns the requests served so far by Cloud Storage operation class,
// for benchmarks that price what a caller does (baton bench cost).
func (s *Server) Ops() Ops {
	return Ops{ClassA: s.front.ops.a.Load(), ClassB: s.front.ops.b.Load(), Free: s.front.ops.free.Load()}
}

// FailNextWrites makes the next n writes to one object get 429
// rateLimitExceeded without reaching the backend, in strict and lax mode
// alike: a fault-injection point for tests of callers' 429 handling, as
// the Mongo emulator's failCommand is for theirs. Test-only.
func (s *Server) FailNextWrites(bucket, object string, n int) {
	key := rateKey(bucket, object)
	s.front.rate.mu.Lock()
	defer s.front.rate.mu.Unlock()
	s.front.rate.force[key] = n
}

// Close stops the server and closes its connections.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	<-s.done
	s.fake.Stop()
	if err != nil {
		return fmt.Errorf("gcs emulator: close: %w", err)
	}
	return nil
}
