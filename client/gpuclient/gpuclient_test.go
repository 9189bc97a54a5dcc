package gpuclient_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/baton-cron/baton/client"
	"github.com/baton-cron/baton/client/gpuclient"
	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
)

// TestGPUClient enqueues (twice with one id: one job), reads, lists,
// cancels and views the pool through the real GPU handler; a bad field is
// a *client.Error naming it.
func TestGPUClient(t *testing.T) {
	d, err := gpu.New(gpu.Config{Store: emutest.Store(t), Pool: gpu.Pool{{URL: "http://127.0.0.1:1", Slots: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.RequireToken("tok", gpu.NewHandler(d)))
	t.Cleanup(srv.Close)
	g, err := gpuclient.New(srv.URL, client.WithToken("tok"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	req := gpu.EnqueueRequest{ID: "job-1", Payload: "echo hi", Priority: 3, Timeout: schedule.Duration(90 * time.Second), Tenant: "data"}
	job, created, err := g.Enqueue(ctx, req)
	if err != nil || !created || job.ID != "job-1" || job.Status != gpu.StatusQueued {
		t.Fatalf("enqueue: %+v created %v, %v", job, created, err)
	}
	if _, created, err := g.Enqueue(ctx, req); err != nil || created {
		t.Errorf("enqueue again: created %v, %v; want the first job", created, err)
	}
	var ids []string
	for j, err := range g.Jobs(ctx, gpuclient.ListQuery{Tenant: "data", PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, j.ID)
	}
	if len(ids) != 1 || ids[0] != "job-1" {
		t.Errorf("jobs of tenant data: %v", ids)
	}
	if pv, err := g.Pool(ctx); err != nil || len(pv.Slots) != 1 {
		t.Errorf("pool: %+v, %v", pv, err)
	}
	if j, err := g.Cancel(ctx, "job-1"); err != nil || j.Status != gpu.StatusCancelled {
		t.Errorf("cancel: %+v, %v", j, err)
	}
	_, _, err = g.Enqueue(ctx, gpu.EnqueueRequest{Payload: "x", Priority: -1})
	var e *client.Error
	if !errors.As(err, &e) || e.Code != "invalid_argument" || e.Field != "priority" {
		t.Errorf("bad priority: %v", err)
	}
	var buf bytes.Buffer
	// Without a bucket the GPU function cannot read logs: its 503 comes
	// back as a typed error through Stream.
	if err := g.Logs(ctx, "job-1", "stdout", 0, &buf); errcode.Code(err) != errcode.Unavailable {
		t.Errorf("logs without a bucket: %v, want unavailable", err)
	}
}
