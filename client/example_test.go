package client_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/baton-cron/baton/client"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/schedule"
)

// Create a schedule, read it back, and change it only if nobody else did
// meanwhile.
func Example() {
	ctx := context.Background()
	c, err := client.New(baseURL, client.WithToken(token))
	if err != nil {
		panic(err)
	}
	sc, err := c.CreateSchedule(ctx, &schedule.Schedule{
		ID:      "nightly-report",
		Cron:    "30 2 * * *",
		Labels:  schedule.Labels{"team": "data"},
		Target:  schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}},
		Enabled: true,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(sc.ID, sc.Version, sc.Overlap, sc.Labels["team"])

	sc, err = c.PatchSchedule(ctx, sc.ID, map[string]any{"cron": "0 3 * * *"}, client.IfMatch(sc.Version))
	if err != nil {
		panic(err)
	}
	fmt.Println(sc.Cron, sc.Version)
	// Output:
	// nightly-report 1 buffer_one data
	// 0 3 * * * 2
}

// A write conditioned on a version that is no longer stored is refused
// with failed_precondition, and callers branch on the code.
func ExampleIfMatch() {
	ctx := context.Background()
	c, _ := client.New(baseURL, client.WithToken(token))
	sc, err := c.CreateScheduleJSON(ctx, []byte(`{"id":"if-match","cron":"@hourly","target":{"type":"builtin","builtin":{"name":"noop"}}}`))
	if err != nil {
		panic(err)
	}
	// Someone else changes it...
	if _, err := c.PatchSchedule(ctx, sc.ID, map[string]any{"description": "theirs"}); err != nil {
		panic(err)
	}
	// ... so our change, based on version 1, is refused.
	_, err = c.PatchSchedule(ctx, sc.ID, map[string]any{"description": "ours"}, client.IfMatch(sc.Version))
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Status, apiErr.Code)
	}
	fmt.Println(client.IsPreconditionFailed(err), errcode.Code(err) == errcode.FailedPrecondition)
	// Output:
	// 412 failed_precondition
	// true true
}

// List the schedules with a label, one page of two at a time.
func ExampleClient_ListSchedules() {
	ctx := context.Background()
	c, _ := client.New(baseURL, client.WithToken(token))
	for _, id := range []string{"etl-a", "etl-b", "etl-c", "web-a"} {
		team := "etl"
		if id == "web-a" {
			team = "web"
		}
		body := fmt.Sprintf(`{"id":%q,"cron":"@daily","labels":{"team":%q},"target":{"type":"builtin","builtin":{"name":"noop"}}}`, id, team)
		if _, err := c.CreateScheduleJSON(ctx, []byte(body)); err != nil {
			panic(err)
		}
	}
	for sc, err := range c.ListSchedules(ctx, client.ListOptions{LabelSelector: "team=etl", PageOptions: client.PageOptions{PageSize: 2}}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(sc.ID)
	}
	// Output:
	// etl-a
	// etl-b
	// etl-c
}

// A bad field is an invalid_argument error naming the field.
func ExampleError() {
	ctx := context.Background()
	c, _ := client.New(baseURL, client.WithToken(token))
	_, err := c.CreateSchedule(ctx, &schedule.Schedule{ID: "bad-labels", Cron: "@daily", Labels: schedule.Labels{"bad key": "x"},
		Target: schedule.Target{Type: schedule.TargetBuiltin, Builtin: &schedule.BuiltinTarget{Name: "noop"}}})
	var apiErr *client.Error
	if errors.As(err, &apiErr) {
		fmt.Println(apiErr.Code, apiErr.Field)
	}
	// Output:
	// invalid_argument labels["bad key"]
}

// Walk a schedule's history of changes, newest first.
func ExampleClient_ListVersions() {
	ctx := context.Background()
	c, _ := client.New(baseURL, client.WithToken(token))
	sc, err := c.CreateScheduleJSON(ctx, []byte(`{"id":"versions","cron":"@daily","target":{"type":"builtin","builtin":{"name":"noop"}}}`))
	if err != nil {
		panic(err)
	}
	if _, err := c.PatchSchedule(ctx, sc.ID, map[string]any{"cron": "@hourly"}, client.IfMatch(sc.Version)); err != nil {
		panic(err)
	}
	for v, err := range c.ListVersions(ctx, sc.ID, client.PageOptions{PageSize: 1}) {
		if err != nil {
			panic(err)
		}
		fmt.Println(v.Version, v.Op)
	}
	// Output:
	// 2 update
	// 1 create
}
