package stack

import (
	"fmt"
	"net/http"
	"time"

	"github.com/baton-cron/baton/emulator/scheduler"
	"github.com/baton-cron/baton/internal/console"
	"github.com/baton-cron/baton/shared/config"
)

// ConsolePath is where the stack serves the operator console; "/"
// redirects there.
const ConsolePath = console.DefaultPrefix + "/"

// withConsole puts the console next to the functions: /console/ is the
// console, calling the stack's own Schedules and GPU functions over HTTP
// with the stack's token (as `baton console` calls a deployed baton), "/"
// redirects to it, and every other path is the functions' mux, whose JSON
// 404 answers unknown paths as before.
func withConsole(functionsMux *http.ServeMux, s *Stack, cfg Config) (http.Handler, error) {
	h, err := console.New(console.Config{
		SchedulesURL: s.URL + "/" + config.FnSchedules,
		GPUURL:       s.URL + "/" + config.FnGPU,
		Token:        cfg.Token,
		HTTP:         &http.Client{Timeout: 30 * time.Second},
		// On a loopback listener (the default) a DNS-rebinding page must
		// not reach the console, which holds the token; a stack listening
		// on another address (a container's 0.0.0.0) is reached by other
		// names on purpose.
		LoopbackOnly: console.IsLoopbackHost(cfg.Addr),
		Logger:       cfg.Logger,
		Clock:        clockNow(cfg.Clock),
	})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	root := http.NewServeMux()
	root.Handle(ConsolePath, http.StripPrefix(console.DefaultPrefix, h))
	root.Handle(console.DefaultPrefix, http.RedirectHandler(ConsolePath, http.StatusMovedPermanently))
	root.Handle("GET /{$}", http.RedirectHandler(ConsolePath, http.StatusFound))
	root.Handle("/", functionsMux)
	return root, nil
}

// clockNow is the stack's clock for the console's fire-time previews: the
// scheduler emulator's when a test drives one, else the wall clock.
func clockNow(c scheduler.Clock) func() time.Time {
	if c == nil {
		return time.Now
	}
	return c.Now
}
