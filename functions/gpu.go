package functions

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"

	"cloud.google.com/go/storage"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/httpapi"
)

func init() {
	register(config.FnGPU, buildGPU)
	register(config.FnGPUCallback, buildGPUCallback)
}

// buildGPU serves the operators' GPU API (gpu.OperatorRoutes: enqueue,
// list, read, cancel, logs, pool) and refuses the workers' callbacks with 421
// wrong_function: those are GPUCallback's. In the cloud operators hold invoker on GPU and
// workers on GPUCallback only, so neither reaches the other's routes, and
// locally the same split holds on one server (/GPU and /GPUCallback).
// Workers are called with the shared bearer token locally and with a
// Google ID token in the cloud, where BATON_TOKEN is unset and IAM guards
// both sides.
func buildGPU(d *Deps) (http.Handler, error) {
	if err := d.NeedStore(); err != nil {
		// Other functions still serve; this one explains what is missing,
		// to callers that hold the token.
		return httpapi.RequireToken(d.Token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { httpapi.WriteError(w, r, err) })), nil
	}
	if err := d.NeedPageSecret(); err != nil {
		return nil, err
	}
	dis, err := NewGPUDispatcher(d)
	if err != nil {
		return nil, err
	}
	// The operators' GPU function reports the queue and the pool: one
	// place per deployment, so the gauges are not doubled.
	if err := dis.ObserveMetrics(); err != nil {
		return nil, err
	}
	return httpapi.RequireToken(d.Token, gpu.NewRoutesHandler(dis, gpu.OperatorRoutes)), nil
}

// buildGPUCallback serves only the workers' :heartbeat and :complete
// (gpu.CallbackRoutes), each still checked against the dispatch's secret.
// A completion hands the slot to the next queued job, so this function
// dispatches to the pool too and needs the database and BATON_GPU_POOL;
// it lists nothing, so it needs no page token secret.
func buildGPUCallback(d *Deps) (http.Handler, error) {
	if err := d.NeedStore(); err != nil {
		return httpapi.RequireToken(d.Token, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { httpapi.WriteError(w, r, err) })), nil
	}
	dis, err := NewGPUDispatcher(d)
	if err != nil {
		return nil, err
	}
	return httpapi.RequireToken(d.Token, gpu.NewRoutesHandler(dis, gpu.CallbackRoutes)), nil
}

// NewGPUDispatcher builds the dispatcher from Deps. The Tick function's
// scheduler uses the same constructor, so a schedule's gpu target and the
// sweep go through the same pool.
func NewGPUDispatcher(d *Deps) (*gpu.Dispatcher, error) {
	pool, err := gpu.ParsePool(d.GPUPool)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvGPUPool, err)
	}
	weights, err := gpu.ParseShares(config.EnvGPUWeights, d.GPUWeights, gpu.MaxWeight)
	if err != nil {
		return nil, err
	}
	quotas, err := gpu.ParseShares(config.EnvGPUQuotas, d.GPUQuotas, gpu.MaxSlotsPerWorker)
	if err != nil {
		return nil, err
	}
	halfLife, err := gpu.ParseHalfLife(config.EnvGPUFairHalfLife, d.GPUFairHalfLife)
	if err != nil {
		return nil, err
	}
	auth := gpu.IDTokenAuthorizer(context.Background())
	if d.Token != "" {
		auth = gpu.BearerAuthorizer(d.Token)
	}
	cfg := gpu.Config{Store: d.Store, Pool: pool, HTTPClient: d.HTTPClient, Authorize: auth,
		Clock: d.Clock, ClockSkew: d.ClockSkew, Logger: d.Logger, Metrics: d.Metrics, Weights: weights, Quotas: quotas, FairHalfLife: halfLife}
	if d.Storage != nil && d.Bucket != "" {
		cfg.Outputs = bucketOutputs{d.Storage.Bucket(d.Bucket)}
	}
	return gpu.New(cfg)
}

// bucketOutputs reads the GPU workers' output objects from the
// deployment's own bucket (gpu.Outputs). The bucket is the function's
// BATON_BUCKET, never one named by a job record.
type bucketOutputs struct{ b *storage.BucketHandle }

// Open opens the object for reading, with fs.ErrNotExist when it is absent
// (not written yet: a worker's upload appears when the command ends).
func (o bucketOutputs) Open(ctx context.Context, object string) (io.ReadCloser, int64, error) {
	r, err := o.b.Object(object).NewReader(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil, 0, fmt.Errorf("gpu logs: %s: %w", object, fs.ErrNotExist)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("gpu logs: open %s: %w", object, err)
	}
	return r, r.Attrs.Size, nil
}
