package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit code through cobra, for commands whose
// exit status is part of their contract (baton lease run: 75, 76, or the
// child's own).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad input: exit status 2, like flag parsing errors.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

var rootCmd = &cobra.Command{
	Use:           "baton",
	Short:         "Serverless cron for Google Cloud: exactly-one-runner schedules, leases and GPU dispatch",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// benchCmd groups the benchmarks (`baton bench lease|tick|gpu`).
var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Measure baton against a baseline run in the same process",
}

func init() {
	rootCmd.AddCommand(benchCmd)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := rootCmd.ExecuteContext(ctx)
	stop()
	if err == nil {
		return
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if ee == nil || ee.err != nil {
		fmt.Fprintln(os.Stderr, "baton:", err)
	}
	os.Exit(code)
}
