package stack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"cloud.google.com/go/storage"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu/worker"
	"github.com/baton-cron/baton/shared/httpapi"
)

// DefaultGPUCommand is what a local GPU worker runs for each job: the
// payload, on stdin, is a shell script. Locally the "GPUs" are CPU workers
// that run real commands.
var DefaultGPUCommand = []string{"sh"}

// gpuWorkers are the local GPU pool: one worker server (one slot) per
// listener. The listeners are bound before the functions are built, so the
// pool's URLs are known to the GPU dispatcher; the workers start serving once
// the control URL (the stack's /GPU) exists.
type gpuWorkers struct {
	lns     []net.Listener
	servers []*http.Server
	workers []*worker.Server
	served  []chan error
}

// listenGPUWorkers binds n local workers' listeners on 127.0.0.1 and
// returns them with the pool they make (BATON_GPU_POOL's format). With a
// data dir, the workers' addresses are kept in dataDir/gpu-workers
// and taken again on the next start when free: a slot's id is its
// worker's URL, and the slot documents carry the GPU fair-share usage
// (docs/gpu.md), so a restart on new ports would forget it.
func listenGPUWorkers(ctx context.Context, n int, dataDir string) (*gpuWorkers, string, error) {
	g := &gpuWorkers{}
	var pool, addrs, prev []string
	keep := ""
	if dataDir != "" {
		keep = filepath.Join(dataDir, "gpu-workers")
		if b, err := os.ReadFile(keep); err == nil {
			prev = strings.Fields(string(b))
		}
	}
	for i := 0; i < n; i++ {
		var ln net.Listener
		var err error
		if i < len(prev) {
			ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", prev[i])
		}
		if ln == nil {
			// No address kept, or it is taken now: a new one.
			ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
		}
		if err != nil {
			g.closeListeners()
			return nil, "", fmt.Errorf("stack: gpu worker %d: listen: %w", i, err)
		}
		g.lns = append(g.lns, ln)
		addrs = append(addrs, ln.Addr().String())
		pool = append(pool, "http://"+ln.Addr().String()+"=1")
	}
	if keep != "" {
		if err := os.WriteFile(keep, []byte(strings.Join(addrs, "\n")+"\n"), 0o600); err != nil { //nolint:gosec // keep is DATA_DIR/gpu-workers, the operator's own --data-dir
			g.closeListeners()
			return nil, "", fmt.Errorf("stack: keep the gpu workers' addresses: %w", err)
		}
	}
	return g, strings.Join(pool, ","), nil
}

func (g *gpuWorkers) closeListeners() {
	for _, ln := range g.lns {
		_ = ln.Close()
	}
}

func (g *gpuWorkers) serve(s *Stack, bucket *storage.BucketHandle, command []string, timeouts httpapi.Timeouts) {
	for _, ln := range g.lns {
		w := worker.New(worker.Config{
			Command: command, ControlURL: s.URL + "/" + config.FnGPUCallback, Token: s.Token,
			Bucket: bucket, Logger: s.Logger,
		})
		// A worker accepts a job and runs it in the background, so every
		// answer is quick and a Write timeout is safe, as in cmd/gpu-worker.
		srv := httpapi.NewServer(w, timeouts.WithWrite(httpapi.QuickWriteTimeout))
		done := make(chan error, 1)
		go func(ln net.Listener) { done <- srv.Serve(ln) }(ln)
		g.workers = append(g.workers, w)
		g.servers = append(g.servers, srv)
		g.served = append(g.served, done)
	}
}

// close stops the workers first (a job in flight is reported interrupted
// and requeued at once), then their HTTP servers.
func (g *gpuWorkers) close(ctx context.Context) error {
	var errs []error
	for _, w := range g.workers {
		if err := w.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stack: gpu worker shutdown: %w", err))
		}
	}
	for i, srv := range g.servers {
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		if err := <-g.served[i]; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("stack: gpu worker serve: %w", err))
		}
	}
	if len(g.servers) == 0 {
		g.closeListeners()
	}
	return errors.Join(errs...)
}
