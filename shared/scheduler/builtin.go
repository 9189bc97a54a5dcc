package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// BuiltinFunc is a builtin target: a Go function run in-process with the
// target's args. Its output is recorded on the run (truncated).
type BuiltinFunc func(ctx context.Context, args map[string]string) (output string, err error)

var (
	builtinMu sync.RWMutex
	builtins  = map[string]BuiltinFunc{}
)

// RegisterBuiltin registers a builtin target by name, replacing any earlier
// one of that name. Register in init (or in a test before schedules that
// use the name are validated).
func RegisterBuiltin(name string, fn func(ctx context.Context, args map[string]string) (output string, err error)) {
	builtinMu.Lock()
	builtins[name] = fn
	builtinMu.Unlock()
}

// Builtins lists the registered builtin names, sorted. The schedule API
// validates builtin targets against it.
func Builtins() []string {
	builtinMu.RLock()
	defer builtinMu.RUnlock()
	out := make([]string, 0, len(builtins))
	for n := range builtins {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func lookupBuiltin(name string) (BuiltinFunc, bool) {
	builtinMu.RLock()
	defer builtinMu.RUnlock()
	fn, ok := builtins[name]
	return fn, ok
}

func init() {
	// noop does nothing, successfully: for tests, demos and benchmarks.
	RegisterBuiltin("noop", func(context.Context, map[string]string) (string, error) { return "ok", nil })
	// sleep waits for args["duration"] (a Go duration; default 1s), or
	// until cancelled.
	RegisterBuiltin("sleep", func(ctx context.Context, args map[string]string) (string, error) {
		d := time.Second
		if s := args["duration"]; s != "" {
			v, err := time.ParseDuration(s)
			if err != nil || v < 0 {
				return "", fmt.Errorf("sleep: args.duration %q is not a non-negative Go duration", s)
			}
			d = v
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return "slept " + d.String(), nil
		case <-ctx.Done():
			return "", fmt.Errorf("sleep: %w", context.Cause(ctx))
		}
	})
	// fail fails with args["message"].
	RegisterBuiltin("fail", func(_ context.Context, args map[string]string) (string, error) {
		msg := args["message"]
		if msg == "" {
			msg = "failed on purpose (builtin fail)"
		}
		return "", errors.New(msg)
	})
}
