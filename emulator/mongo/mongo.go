package mongo

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Options configures Start.
type Options struct {
	// Dir holds the SQLite files. Empty means a temporary directory that
	// Close removes.
	Dir string
	// Addr is the client-facing listen address; default 127.0.0.1:0.
	Addr string
	// Logger receives the emulator's own logs. FerretDB's logs are dropped
	// unless Verbose is set.
	Logger *slog.Logger
	// Verbose passes FerretDB's logs through at debug level.
	Verbose bool
	// Lax turns strict mode off. Strict (the zero value) makes the front
	// as strict as Firestore with MongoDB compatibility on what baton can
	// meet: load balanced handshakes only, 112 for overlapping writes to
	// one document, unsorted results in no stable order, and the
	// documented limits on documents (strict.go, contention.go, order.go,
	// limits.go). Lax is for debugging a test or the local stack: every
	// write then waits its turn and nothing above is refused; Start logs
	// a warning that says so.
	Lax bool
}

// Server is a running emulator.
type Server struct {
	uri     string
	backend string // FerretDB's own URI, bypassing the front (tests only)
	front   *front
	cancel  context.CancelFunc
	done    chan struct{}
	tempDir string
	closers []func() error
}

// Start runs FerretDB in-process and returns once it accepts connections.
func Start(ctx context.Context, opts Options) (*Server, error) {
	s := &Server{done: make(chan struct{})}
	dir := opts.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "baton-mongo-")
		if err != nil {
			return nil, fmt.Errorf("mongo emulator: temp dir: %w", err)
		}
		dir, s.tempDir = tmp, tmp
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("mongo emulator: data dir: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("mongo emulator: data dir: %w", err)
	}
	fdb, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: "127.0.0.1:0"},
		Handler:   "sqlite",
		SQLiteURL: "file:" + abs + "/",
		Logger:    ferretLogger(opts),
	})
	if err != nil {
		if s.tempDir != "" {
			_ = os.RemoveAll(s.tempDir)
		}
		return nil, fmt.Errorf("mongo emulator: start ferretdb: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	go func() {
		defer close(s.done)
		_ = fdb.Run(runCtx)
	}()
	backend := fdb.MongoDBURI() // waits until FerretDB listens
	s.backend = backend
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	f, err := startFront(addr, backend, opts.Logger, !opts.Lax)
	if err != nil {
		// The front's failure is the one to report; Close only tidies up
		// FerretDB and the temporary directory behind it.
		_ = s.Close()
		return nil, err
	}
	if opts.Lax {
		logger := opts.Logger
		if logger == nil {
			logger = slog.Default()
		}
		logger.Warn("mongo emulator: strict mode is off (lax): writes are serialised and never answer 112, " +
			"handshakes without loadBalanced are accepted, unsorted results come in insertion order, and document limits are not checked; " +
			"production Firestore does all of that")
	}
	f.ids = &idIndexer{dir: abs}
	s.front = f
	s.closers = append(s.closers, f.close)
	s.uri = f.uri()
	return s, nil
}

// ferretLogger is the logger FerretDB gets. FerretDB logs every connection
// and, at debug level, every message, so it is silent unless Verbose is set.
// Verbose sends its logs to opts.Logger (whose handler decides the level) or,
// without one, to stderr at debug level.
func ferretLogger(opts Options) *slog.Logger {
	if !opts.Verbose {
		return slog.New(slog.DiscardHandler)
	}
	if opts.Logger != nil {
		return opts.Logger.With("component", "ferretdb")
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// URI is the client-facing connection string: no database, and the one
// option Firestore's own strings carry that matters here,
// loadBalanced=true ("mongodb://127.0.0.1:port/?loadBalanced=true").
func (s *Server) URI() string { return s.uri }

// Stats returns what strict mode has done so far: 112s answered, the most
// writes in flight at once, refusals, shuffled batches.
func (s *Server) Stats() Stats { return s.front.stats.snapshot() }

// Billing returns what database db ("" for every database) has cost so far
// in Firestore's billing units, measured on the wire: read units of 4 KiB,
// write units of 1 KiB with index entries (billing.go). Benchmarks price
// operations with it (baton bench cost).
func (s *Server) Billing(db string) Billing { return s.front.bill.snapshot(db) }

// Close stops the front (listener and every connection), then FerretDB, and
// removes a temporary data directory.
func (s *Server) Close() error {
	for _, c := range s.closers {
		_ = c()
	}
	s.cancel()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
	if s.tempDir != "" {
		return os.RemoveAll(s.tempDir)
	}
	return nil
}
