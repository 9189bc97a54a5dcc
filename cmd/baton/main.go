package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/logging"
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
	rootCmd.PersistentFlags().Var(&rootLogFormat, logFormatFlag,
		"log format on stderr: text, json, or auto (text when stderr is a terminal, else JSON with Cloud Logging's severity and message)")
	groupCommand(rootCmd)
	groupCommand(benchCmd)
}

// The --log-format flag and its values.
const (
	logFormatFlag = "log-format"
	logFormatAuto = "auto"
)

// logFormats are --log-format's values, for its check and its completion.
var logFormats = []string{logging.FormatText, logging.FormatJSON, logFormatAuto}

// rootLogFormat is the value of the root's persistent --log-format.
var rootLogFormat = logFormat(logFormatAuto)

// logFormat is --log-format's value. Set refuses anything but text, json
// and auto, so a bad value is a flag error (exit 2, naming the flag) on
// every command, before it does anything.
type logFormat string

func (f *logFormat) String() string { return string(*f) }

// Type names the value in the help.
func (f *logFormat) Type() string { return "format" }

// Set checks and stores one value.
func (f *logFormat) Set(s string) error {
	for _, v := range logFormats {
		if s == v {
			*f = logFormat(s)
			return nil
		}
	}
	return fmt.Errorf("want %s, not %q", strings.Join(logFormats, ", "), s)
}

// newLogger is the one way cmd/baton makes a logger: on cmd's stderr, at
// level, in the format --log-format asks for. auto means text when that
// stderr is a terminal (a person reads it) and JSON otherwise (a file, a
// pipe, Cloud Run, where Cloud Logging parses severity and message).
func newLogger(cmd *cobra.Command, level string) *slog.Logger {
	w := cmd.ErrOrStderr()
	format := logFormatAuto
	if f := cmd.Flag(logFormatFlag); f != nil {
		format = f.Value.String()
	}
	log, err := logging.NewFormat(w, resolveLogFormat(format, w), level)
	if err != nil { // only text and json reach NewFormat; keep logging anyway
		return logging.New(w, level)
	}
	return log
}

// resolveLogFormat turns auto into text or json for the writer w.
func resolveLogFormat(format string, w io.Writer) string {
	if format != logFormatAuto {
		return format
	}
	if f, ok := w.(interface{ Fd() uintptr }); ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())) {
		return logging.FormatText
	}
	return logging.FormatJSON
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
	registerCompletions(rootCmd, schedulesClientFromEnv, gpuClientFromEnv)
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
