package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/idtoken"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu/worker"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/logging"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gpu-worker:", err)
		os.Exit(1)
	}
}

func run() error {
	log := logging.New(os.Stdout, config.Get(config.EnvLogLevel))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	var argv []string
	if err := json.Unmarshal([]byte(config.Get(config.EnvWorkerCommand)), &argv); err != nil {
		return fmt.Errorf("%s must be a non-empty JSON list such as [\"python\",\"/app/job.py\"]: %w", config.EnvWorkerCommand, err)
	}
	if len(argv) == 0 {
		return fmt.Errorf("%s must be a non-empty JSON list such as [\"python\",\"/app/job.py\"]", config.EnvWorkerCommand)
	}
	control := config.Get(config.EnvControlURL)
	if control == "" {
		return fmt.Errorf("%s is required: the GPUCallback function's URL, for heartbeats and completions", config.EnvControlURL)
	}
	cfg := worker.Config{Command: argv, ControlURL: control, Token: config.Get(config.EnvToken), Logger: log}
	if cfg.Token == "" {
		// In the cloud GPUCallback is private: call it with a Google
		// ID token for its URL, from the service's own identity.
		c, err := idtoken.NewClient(ctx, control)
		if err != nil {
			return fmt.Errorf("ID token client for %s: %w", control, err)
		}
		c.Timeout = 30 * time.Second
		cfg.HTTPClient = c
	}
	if b := config.Get(config.EnvBucket); b != "" {
		sc, err := storage.NewClient(ctx)
		if err != nil {
			return fmt.Errorf("storage client: %w", err)
		}
		defer sc.Close()
		cfg.Bucket = sc.Bucket(b)
	}
	ws := worker.New(cfg)
	// The worker accepts a job and runs it in the background (POST /run
	// answers 202 at once), so a Write timeout cuts off only a stuck client.
	srv := httpapi.NewServer(ws, httpapi.DefaultTimeouts.WithWrite(httpapi.QuickWriteTimeout))
	srv.Addr = ":" + config.Get(config.EnvPort)
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	log.Info("gpu-worker: listening", "addr", srv.Addr, "command", argv, "control", control)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Cloud Run allows 10 s after SIGTERM: report the running job
	// interrupted (it is requeued at once), then stop serving.
	sctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	werr := ws.Shutdown(sctx)
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return errors.Join(werr, err)
	}
	return werr
}
