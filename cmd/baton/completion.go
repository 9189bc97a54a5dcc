package main

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/catalog"
	"github.com/baton-cron/baton/shared/gpu"
	"github.com/baton-cron/baton/shared/schedule"
)

// Dynamic shell completion. cobra's own `baton completion bash|zsh|fish|
// powershell` writes the script; the script calls the hidden
// `baton __complete …`, which runs the functions registered here.
//
// They are attached by walking the finished command tree by name (main
// calls registerCompletions before Execute), not in each command's
// constructor, so a command another file adds, such as `gpu logs`, gets
// its completion without this file and that one knowing each other.

const (
	// completionTimeout bounds the one API call a completion makes: a
	// shell waiting on <TAB> must not hang on an unreachable API.
	completionTimeout = 2 * time.Second
	// completionPageSize is how many ids a completion offers at most: one
	// page, so a <TAB> costs one small read whatever the data.
	completionPageSize = 100
)

// noFiles is the directive of every completion here: ids and enum values,
// never file names (a shell would otherwise offer the files of the
// current directory, which are never a schedule id).
const noFiles = cobra.ShellCompDirectiveNoFileComp

// completeFunc is cobra's signature for argument and flag completion.
type completeFunc = func(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective)

// registerCompletions attaches completions to root's tree: schedule ids,
// run ids and GPU job ids from the API (schedules and gpu are the clients
// of the Schedules and GPU functions), and the values of the enum flags
// from the domain packages. A command or flag that is missing is skipped,
// and registering twice keeps the first registration (cobra refuses the
// second), so it is safe to call once per tree.
func registerCompletions(root *cobra.Command, schedules, gpuClient clientFunc) {
	scheduleIDs := idCompletion(schedules, "/schedules", nil, func(p *catalog.SchedulePage) []cobra.Completion {
		var out []cobra.Completion
		for _, s := range p.Schedules {
			out = append(out, cobra.CompletionWithDesc(s.ID, s.Cron))
		}
		return out
	})
	runIDs := idCompletion(schedules, "/runs", nil, func(p *catalog.RunPage) []cobra.Completion {
		var out []cobra.Completion
		for _, r := range p.Runs {
			out = append(out, cobra.CompletionWithDesc(r.ID, string(r.Status)))
		}
		return out
	})
	jobIDs := idCompletion(gpuClient, "/gpu/jobs", nil, func(p *gpu.JobPage) []cobra.Completion {
		var out []cobra.Completion
		for _, j := range p.Jobs {
			out = append(out, cobra.CompletionWithDesc(j.ID, string(j.Status)))
		}
		return out
	})

	for _, name := range []string{"get", "describe", "update", "pause", "resume", "trigger", "delete", "backfill"} {
		setArgs(root, firstArg(scheduleIDs), "schedules", name)
	}
	setArgs(root, firstArg(runIDs), "runs", "get")
	for _, name := range []string{"get", "cancel", "logs"} {
		setArgs(root, firstArg(jobIDs), "gpu", name)
	}
	setFlag(root, "schedule", scheduleIDs, "runs", "list")

	setFlag(root, "status", enum(schedule.AllRunStatuses()), "runs", "list")
	setFlag(root, "source", enum(schedule.AllSources()), "runs", "list")
	setFlag(root, "status", enum(gpu.AllJobStatuses()), "gpu", "list")
	for _, name := range []string{"create", "update"} {
		setFlag(root, "overlap", enum(schedule.AllOverlaps()), "schedules", name)
		setFlag(root, "catchup", enum(schedule.AllCatchups()), "schedules", name)
	}
	_ = root.RegisterFlagCompletionFunc(logFormatFlag, enum(logFormats))
	outputs := enum([]string{outputTable, outputJSON, outputYAML})
	walk(root, func(c *cobra.Command) {
		if c.LocalFlags().Lookup("output") != nil {
			_ = c.RegisterFlagCompletionFunc("output", outputs)
		}
	})
}

// idCompletion completes one id from the first page (at most
// completionPageSize) of the list at path, keeping those that start with
// what was typed. Any failure (no client configured, API unreachable, an
// error answer, the timeout) offers nothing: a completion must never dump
// an error into the user's shell. P is the list's page type and items
// picks the ids (with a short description) out of it.
func idCompletion[P any](client clientFunc, path string, q url.Values, items func(*P) []cobra.Completion) completeFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		c, err := client()
		if err != nil {
			cobra.CompDebugln("baton: completion: "+err.Error(), false)
			return nil, noFiles
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, cancel := context.WithTimeout(ctx, completionTimeout)
		defer cancel()
		pq := url.Values{"pageSize": {strconv.Itoa(completionPageSize)}}
		for k, v := range q {
			pq[k] = v
		}
		var page P
		if _, err := c.do(ctx, "GET", path, pq, nil, nil, &page); err != nil {
			cobra.CompDebugln("baton: completion: "+err.Error(), false)
			return nil, noFiles
		}
		var out []cobra.Completion
		for _, item := range items(&page) {
			if strings.HasPrefix(string(item), toComplete) {
				out = append(out, item)
			}
		}
		return out, noFiles
	}
}

// firstArg applies f to the first positional argument only: the commands
// it is used on take exactly one id.
func firstArg(f completeFunc) completeFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, noFiles
		}
		return f(cmd, args, toComplete)
	}
}

// enum completes one of a fixed list of values.
func enum[T ~string](values []T) completeFunc {
	s := make([]cobra.Completion, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return cobra.FixedCompletions(s, noFiles)
}

// find returns the command at path below root (by name or alias), or nil.
func find(root *cobra.Command, path ...string) *cobra.Command {
	c := root
	for _, name := range path {
		var next *cobra.Command
		for _, sub := range c.Commands() {
			if sub.Name() == name || sub.HasAlias(name) {
				next = sub
				break
			}
		}
		if next == nil {
			return nil
		}
		c = next
	}
	return c
}

// setArgs sets the argument completion of the command at path, unless it
// is missing or already has one of its own.
func setArgs(root *cobra.Command, f completeFunc, path ...string) {
	if c := find(root, path...); c != nil && c.ValidArgsFunction == nil {
		c.ValidArgsFunction = f
	}
}

// setFlag registers f for the flag of the command at path, when both
// exist.
func setFlag(root *cobra.Command, flag string, f completeFunc, path ...string) {
	if c := find(root, path...); c != nil && c.Flags().Lookup(flag) != nil {
		_ = c.RegisterFlagCompletionFunc(flag, f)
	}
}

// walk calls f on root and every command below it.
func walk(root *cobra.Command, f func(*cobra.Command)) {
	f(root)
	for _, c := range root.Commands() {
		walk(c, f)
	}
}
