package functions

import (
	"context"
	"fmt"
	"net/http"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/httpapi"
)

func init() {
	register(config.FnGPU, buildGPU)
}

// buildGPU serves the GPU queue's REST API and the workers' callbacks
// (routes in gpu.NewHandler). Workers are called with the shared bearer
// token locally and with a Google ID token in the cloud, where BATON_TOKEN
// is unset and IAM guards both sides.
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
	return httpapi.RequireToken(d.Token, gpu.NewHandler(dis)), nil
}

// NewGPUDispatcher builds the dispatcher from Deps. The Tick function's
// scheduler uses the same constructor, so a schedule's gpu target and the
// sweep go through the same pool.
func NewGPUDispatcher(d *Deps) (*gpu.Dispatcher, error) {
	pool, err := gpu.ParsePool(d.GPUPool)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvGPUPool, err)
	}
	auth := gpu.IDTokenAuthorizer(context.Background())
	if d.Token != "" {
		auth = gpu.BearerAuthorizer(d.Token)
	}
	return gpu.New(gpu.Config{Store: d.Store, Pool: pool, HTTPClient: d.HTTPClient, Authorize: auth,
		Now: d.Clock(), ClockSkew: d.ClockSkew, Logger: d.Logger})
}
