package functions

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/metrics"
)

var (
	cloudMetricsOnce sync.Once
	cloudMetricsSet  *metrics.Set
	cloudMetricsErr  error
)

// CloudMetrics opens the Cloud Monitoring export once per process, when
// BATON_METRICS says so (auto: in the cloud). FromEnv calls it for the
// functions, and baton daemon for itself. It flushes on SIGTERM, which
// Cloud Run sends before stopping an instance, and then lets the signal
// take its default course. nil (metrics off) records nothing.
func CloudMetrics(ctx context.Context, log *slog.Logger) (*metrics.Set, error) {
	cloudMetricsOnce.Do(func() {
		mode := config.Get(config.EnvMetrics)
		switch mode {
		case "off":
			return
		case "auto":
			if !config.InCloud() {
				return
			}
		case "on":
		default:
			cloudMetricsErr = fmt.Errorf("%s=%q: want auto, on or off", config.EnvMetrics, mode)
			return
		}
		interval, err := config.Duration(config.EnvMetricsInterval)
		if err != nil {
			cloudMetricsErr = err
			return
		}
		label := config.Get(config.EnvMetricsScheduleLabel)
		if label != "true" && label != "false" {
			cloudMetricsErr = fmt.Errorf("%s=%q: want true or false", config.EnvMetricsScheduleLabel, label)
			return
		}
		c, err := metrics.OpenCloud(ctx, os.Getenv("K_SERVICE"), interval, metrics.Options{NoScheduleLabel: label == "false"})
		if err != nil {
			cloudMetricsErr = err
			return
		}
		cloudMetricsSet = c.Set
		flushOnSIGTERM(context.WithoutCancel(ctx), log, c.Shutdown)
	})
	return cloudMetricsSet, cloudMetricsErr
}

// flushOnSIGTERM runs flush when SIGTERM arrives, then restores the
// default action and raises the signal again, so the process ends as it
// would have without us.
func flushOnSIGTERM(ctx context.Context, log *slog.Logger, flush func(context.Context) error) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM)
	go func() {
		<-ch
		// Cloud Run allows 10 s between SIGTERM and SIGKILL.
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := flush(fctx); err != nil {
			log.Warn("metrics: flush on shutdown failed", "err", err)
		}
		cancel()
		signal.Stop(ch)
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}()
}
