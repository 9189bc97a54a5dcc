package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
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
	rootCmd.Version = buildVersion(debug.ReadBuildInfo())
	rootCmd.SetVersionTemplate("baton {{.Version}}\n")
	rootCmd.AddCommand(benchCmd, newVersionCmd())
	groupCommand(rootCmd)
	groupCommand(benchCmd)
}

// buildVersion describes the binary from its build info: the module
// version ("(devel)" for go run, go test and builds outside a module
// version), then the VCS revision, its commit time and whether the tree was
// modified, when the go command recorded them, and the Go version. It never
// fails: without build info it says so.
func buildVersion(bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return "unknown (no build info)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var parts []string
	for _, key := range []string{"vcs.revision", "vcs.time", "vcs.modified"} {
		for _, s := range bi.Settings {
			if s.Key != key || s.Value == "" {
				continue
			}
			switch key {
			case "vcs.revision":
				parts = append(parts, "revision "+s.Value)
			case "vcs.time":
				parts = append(parts, s.Value)
			case "vcs.modified":
				if s.Value == "true" {
					parts = append(parts, "modified")
				} else {
					parts = append(parts, "clean")
				}
			}
		}
	}
	if bi.GoVersion != "" {
		parts = append(parts, bi.GoVersion)
	}
	if len(parts) == 0 {
		return v
	}
	return v + " (" + strings.Join(parts, ", ") + ")"
}

// newVersionCmd builds `baton version`, which prints what --version prints.
func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print baton's module version and VCS revision (as --version does)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "baton %s\n", cmd.Root().Version)
			return err
		},
	}
}

// groupCommand makes cmd, which only groups subcommands, refuse an unknown
// subcommand with exit status 2 and cobra's "Did you mean this?"
// suggestions, instead of printing help and exiting 0 (so a typo in a
// script fails). Bare, it still prints its help. It returns cmd.
func groupCommand(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs // the RunE below checks them
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return unknownCommand(c, args[0])
	}
	flagUsage(cmd)
	return cmd
}

// unknownCommand is the usage error for a subcommand name that c lacks,
// with the names of c's subcommands that are close to it.
func unknownCommand(c *cobra.Command, name string) error {
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	msg += fmt.Sprintf("\n\nRun '%s --help' for usage.", c.CommandPath())
	return usageError("%s", msg)
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
