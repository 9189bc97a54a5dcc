package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// defaultWatchInterval is --watch-interval's default: often enough to see
// a run start and finish, rare enough that a watch costs little.
const defaultWatchInterval = 2 * time.Second

// watchFlags are -w/--watch and --watch-interval of a list command.
type watchFlags struct {
	on       bool
	interval time.Duration
}

// watchHelp is appended to a list command's help: what a watch prints and
// what it costs. %s is what one poll reads, a sentence of its own.
const watchHelp = `

With -w (--watch) the command prints the list, then polls it every
--watch-interval (default 2s) and prints only the rows that are new or have
changed, as kubectl get -w does, until Ctrl-C (exit 0). A row that leaves
what is polled is not reported as deleted. With -o json a watch prints one
JSON object per line (NDJSON): first each row of the list, then each
change; with -o yaml one YAML document per row, each starting with ---.

%s`

// pagedWatch says, for watchHelp, what one poll of a paged list reads:
// its first page, which holds what (the newest runs, say).
func pagedWatch(what string) string {
	return "Each poll reads the first page only (" + what + `: the --page-size
asked, else the server's default), so a watch's reads grow with the page
size, not with the data. --watch cannot go with --all or --page-token.`
}

// addWatch registers -w/--watch and --watch-interval on cmd, appends
// watchHelp to its help (polls says what one poll reads), and checks the flags before the command runs (so
// a bad interval is a usage error before any request).
func addWatch(cmd *cobra.Command, polls string) *watchFlags {
	w := &watchFlags{}
	f := cmd.Flags()
	f.BoolVarP(&w.on, "watch", "w", false, "after the list, poll and print rows that are new or changed, until Ctrl-C")
	f.DurationVar(&w.interval, "watch-interval", defaultWatchInterval, "with --watch: time between two polls (more than 0)")
	if cmd.Long == "" {
		cmd.Long = cmd.Short + "."
	}
	cmd.Long += fmt.Sprintf(watchHelp, polls)
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := w.check(c); err != nil {
			return err
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
	return w
}

// check validates the watch flags against each other and the paging
// flags.
func (w *watchFlags) check(c *cobra.Command) error {
	path := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
	if w.interval <= 0 {
		return usageError("%s: --watch-interval must be more than 0, not %s", path, w.interval)
	}
	fs := c.Flags()
	if fs.Changed("watch-interval") && !w.on {
		return usageError("%s: --watch-interval needs --watch (-w)", path)
	}
	if !w.on {
		return nil
	}
	for _, name := range []string{"all", "page-token"} {
		if fs.Changed(name) {
			return usageError("%s: --watch polls the first page only; it cannot go with --%s", path, name)
		}
	}
	return nil
}

// watchSpec says how to watch one list of T.
type watchSpec[T any] struct {
	// fetch reads the first page, as the list command would.
	fetch func(context.Context) ([]T, error)
	// key is a row's identity (its id).
	key func(T) string
	// version changes whenever a row changes in a way worth printing
	// again: a version number, a status, an update time. Fields that
	// change all the time (a heartbeat, time left) stay out of it.
	version func(T) string
	// header and row are the table's header and a row's line, tab
	// separated, without the newline.
	header string
	row    func(T) string
}

// runWatch prints s's list once, then every w.interval prints the rows
// that are new or whose version changed, until ctx ends (Ctrl-C), which
// is a success. A failed first fetch is the command's error; a failed
// later poll is said on stderr and retried at the next interval, so a
// blip of the network does not end a long watch.
func runWatch[T any](ctx context.Context, cmd *cobra.Command, w *watchFlags, out *outputFormat, s watchSpec[T]) error {
	seen := map[string]string{}
	rows, err := s.fetch(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	stdout := cmd.OutOrStdout()
	var cols columns
	if err := emitWatch(stdout, out, s, &cols, rows, true); err != nil {
		return err
	}
	for _, r := range rows {
		seen[s.key(r)] = s.version(r)
	}
	t := time.NewTicker(w.interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		rows, err := s.fetch(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !failing { // once per outage, not once per poll
				fmt.Fprintf(cmd.ErrOrStderr(), "baton: watch: %v (retrying every %s)\n", err, w.interval)
			}
			failing = true
			continue
		}
		failing = false
		var changed []T
		for _, r := range rows {
			k, v := s.key(r), s.version(r)
			if old, ok := seen[k]; ok && old == v {
				continue
			}
			seen[k] = v
			changed = append(changed, r)
		}
		if err := emitWatch(stdout, out, s, &cols, changed, false); err != nil {
			return err
		}
	}
}

// apiFailureOrNil is apiFailure, but nil for nil: a watch's fetch
// returns it as is.
func apiFailureOrNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return apiFailure(op, err)
}

// emitWatch prints rows: table lines (the header only with the first
// listing), one compact JSON object per line, or one YAML document each.
// cols keeps the table's column widths across calls, so later rows line
// up under the header printed first.
func emitWatch[T any](w io.Writer, out *outputFormat, s watchSpec[T], cols *columns, rows []T, first bool) error {
	switch out.format {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		for _, r := range rows {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return nil
	case outputYAML:
		for _, r := range rows {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
			if err := writeYAML(w, r); err != nil {
				return err
			}
		}
		return nil
	}
	var lines []string
	if first {
		lines = append(lines, s.header)
	}
	for _, r := range rows {
		lines = append(lines, s.row(r))
	}
	_, err := io.WriteString(w, cols.format(lines))
	return err
}

// columns aligns tab-separated lines the way the list commands'
// text/tabwriter tables do (each cell padded to its column's width plus
// two spaces, the last cell not padded), but remembers the widths, which
// only grow, so rows printed later line up with those printed before.
type columns struct{ widths []int }

// format widens the columns for lines and returns them aligned.
func (c *columns) format(lines []string) string {
	split := make([][]string, len(lines))
	for i, l := range lines {
		split[i] = strings.Split(l, "\t")
		for j, cell := range split[i][:len(split[i])-1] {
			if j == len(c.widths) {
				c.widths = append(c.widths, 0)
			}
			c.widths[j] = max(c.widths[j], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for _, cells := range split {
		for j, cell := range cells {
			b.WriteString(cell)
			if j < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", c.widths[j]-utf8.RuneCountInString(cell)+2))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
