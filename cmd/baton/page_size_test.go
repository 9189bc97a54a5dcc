package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestPageSizeValidated: every list command refuses a --page-size outside
// 1..500 (0 included) with exit 2 naming the flag, before making a client,
// so no request is sent; 1 and 500 get through to the client.
func TestPageSizeValidated(t *testing.T) {
	t.Parallel()
	errSent := errors.New("a request would be sent")
	lists := [][]string{
		{"schedules", "list"},
		{"runs", "list", "--schedule", "nightly"},
		{"gpu", "list"},
	}
	for _, list := range lists {
		for _, size := range []string{"0", "-1", "501", "9999", "1", "500"} {
			calls := 0
			client := func() (*apiClient, error) { calls++; return nil, errSent }
			root := &cobra.Command{Use: "baton", SilenceUsage: true, SilenceErrors: true}
			root.AddCommand(newSchedulesCmd(client), newRunsCmd(client), newGPUCmd(client))
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			args := append(append([]string{}, list...), "--page-size", size)
			root.SetArgs(args)
			err := root.ExecuteContext(context.Background())
			line := strings.Join(args, " ")
			if size == "1" || size == "500" {
				if !errors.Is(err, errSent) || calls != 1 {
					t.Errorf("baton %s: %v after %d client calls; want the request made", line, err, calls)
				}
				continue
			}
			if code := exitCode(err); code != 2 || !strings.Contains(err.Error(), "--page-size must be from 1 to 500, not "+size) {
				t.Errorf("baton %s: exit %d, %v; want 2 naming --page-size", line, code, err)
			}
			if calls != 0 {
				t.Errorf("baton %s: made a client %d times; want no request", line, calls)
			}
		}
	}
}
