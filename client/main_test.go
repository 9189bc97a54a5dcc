package client_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// The examples and tests talk to a real Schedules handler (catalog over
// the Mongo emulator), started once for the package: baseURL is where,
// token the bearer token it wants.
var (
	baseURL string
	token   = "example-token"
	// handler is the Schedules handler, for the tests that put a faulty
	// hop in front of it.
	handler http.Handler
	// st is the store behind it.
	st *mongostore.Store
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	srv, err := mongo.Start(ctx, mongo.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the mongo emulator:", err)
		return 1
	}
	defer srv.Close()
	st, err = mongostore.Open(ctx, srv.URI(), mongostore.Options{Database: "client_test"})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open the store:", err)
		return 1
	}
	defer st.Close(ctx)
	svc := catalog.New(st, catalog.Options{
		Validate: schedule.ValidateOptions{AllowedHosts: []string{"api.example.com"}, Builtins: scheduler.Builtins()},
	})
	handler = httpapi.RequireToken(token, catalog.NewHandler(svc, catalog.HandlerOptions{}))
	hs := httptest.NewServer(handler)
	defer hs.Close()
	baseURL = hs.URL
	return m.Run()
}
