package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	mexporter "github.com/GoogleCloudPlatform/opentelemetry-operations-go/exporter/metric"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	gcpdetector "go.opentelemetry.io/contrib/detectors/gcp"
	"go.opentelemetry.io/otel"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

// Local is a Set whose instruments Prometheus serves: baton local mounts
// Handler at /metrics. Each Local has its own registry, so several stacks
// in one process (tests) do not mix their numbers.
type Local struct {
	// Set records; hand it to the domain packages.
	Set *Set
	// Handler serves the Prometheus text format.
	Handler http.Handler

	provider *sdkmetric.MeterProvider
}

// NewLocal builds a Prometheus-backed Set.
func NewLocal(o Options) (*Local, error) {
	reg := prometheus.NewRegistry()
	exp, err := promexporter.New(
		promexporter.WithRegisterer(reg),
		// The instruments are named as Prometheus names them already
		// (baton_runs_total, …_seconds): no suffix is added twice.
		promexporter.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithoutSuffixes),
		promexporter.WithoutScopeInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("metrics: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	s, err := New(mp, o)
	if err != nil {
		return nil, err
	}
	return &Local{Set: s, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), provider: mp}, nil
}

// Shutdown stops the provider.
func (l *Local) Shutdown(ctx context.Context) error {
	if err := l.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("metrics: shutdown: %w", err)
	}
	return nil
}

// DefaultInterval is how often a cloud instance exports. Cloud Monitoring
// accepts one point per series every 5 s at most, and an instance's series
// are its own (the resource names the instance), so a minute is cheap and
// well inside that.
const DefaultInterval = time.Minute

// Cloud is the exporting side in the cloud: a periodic reader into Cloud
// Monitoring, installed as OpenTelemetry's global provider, so Default()
// records into it.
type Cloud struct {
	// Set records into Cloud Monitoring.
	Set      *Set
	provider *sdkmetric.MeterProvider
}

// OpenCloud builds the Cloud Monitoring exporter for service (the
// function's name), exporting every interval (DefaultInterval when zero).
// The resource is detected from the Cloud Run metadata, so every instance
// writes its own series.
func OpenCloud(ctx context.Context, service string, interval time.Duration, o Options) (*Cloud, error) {
	if interval <= 0 {
		interval = DefaultInterval
	}
	exp, err := mexporter.New()
	if err != nil {
		return nil, fmt.Errorf("metrics: cloud monitoring exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithDetectors(gcpdetector.NewDetector()),
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(service)),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("metrics: detect resource: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp, sdkmetric.WithInterval(interval))),
		sdkmetric.WithResource(res),
	)
	otel.SetMeterProvider(mp)
	s, err := New(mp, o)
	if err != nil {
		_ = mp.Shutdown(ctx)
		return nil, err
	}
	return &Cloud{Set: s, provider: mp}, nil
}

// Shutdown exports what the last period collected and stops: an instance
// that is stopped between two periods loses nothing it recorded.
func (c *Cloud) Shutdown(ctx context.Context) error {
	if err := c.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("metrics: flush on shutdown: %w", err)
	}
	return nil
}
