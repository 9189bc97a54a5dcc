package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/client"
	"github.com/baton-cron/baton/shared/schedule"
)

func init() { rootCmd.AddCommand(newApplyCmd(schedulesClientFromEnv)) }

// Apply's exit codes, as `terraform plan -detailed-exitcode` has them.
const (
	applyNoChanges = 0
	applyError     = 1
	applyChanged   = 2
)

// applyAction is what the plan does with one object.
type applyAction string

const (
	actCreate    applyAction = "create"
	actUpdate    applyAction = "update"
	actUnchanged applyAction = "unchanged"
	actDelete    applyAction = "delete"
)

// planStep is one object of the plan.
type planStep struct {
	action applyAction
	kind   string
	id     string
	doc    *applyDoc // nil for a delete
	// version is the stored version the plan read (update, delete): the
	// write's If-Match, so that a concurrent edit stops the apply.
	version int64
	// patch is an update's merge patch (schedules) and diff its lines.
	patch map[string]any
	diff  []string
}

// ignoredFields are left out of the comparison: the server's own, and the
// pause's bookkeeping, which follows enabled.
var ignoredFields = []string{"id", "nextRunAt", "misfire", "version", "createdAt", "updatedAt", "pauseReason", "pausedBy", "pausedAt", "pausedUntil"}

func newApplyCmd(newClient clientFunc) *cobra.Command {
	var (
		files    []string
		owner    string
		prune    bool
		dryRun   bool
		selector string
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR [-f …]",
		Short: "Make the schedules and calendars in YAML or JSON files so: print the plan, then create, update and (--prune) delete",
		Long: `Read every document of the files (a directory: its *.yaml, *.yml and
*.json files), check each as the API would, print the plan (create,
update with the fields that change, unchanged, delete), then write it.
A document is kind: Schedule or kind: Calendar, an optional
metadata: {owner: NAME}, and the API's own fields at the top level.

Any bad document stops the apply before anything is written, naming
file:line and the field. Updates and deletes carry If-Match with the
version the plan read: an object changed meanwhile stops the apply.

--owner NAME (or metadata.owner) labels what is applied baton.dev/owner=NAME.
--prune (which needs --owner) also deletes the schedules and calendars
labelled with that owner that the files no longer hold; nothing else.

Exit status, as terraform plan -detailed-exitcode: 0 no changes, 2
changes applied (with --dry-run: changes planned), 1 an error.`,
		Example: `  baton apply -f schedules/ --owner team-a --dry-run
  baton apply -f schedules/ --owner team-a --prune`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return &exitError{code: applyError, err: fmt.Errorf("apply: -f FILE|DIR is required")}
			}
			if prune && owner == "" {
				return &exitError{code: applyError, err: fmt.Errorf("apply: --prune needs --owner: it deletes only what that owner applied")}
			}
			if owner != "" {
				if why := schedule.ValidateLabelValue(owner); why != "" {
					return &exitError{code: applyError, err: fmt.Errorf("apply: --owner %q: %s", owner, why)}
				}
			}
			sel, err := schedule.ParseLabelSelector("--selector", selector)
			if err != nil {
				return &exitError{code: applyError, err: fmt.Errorf("apply: %w", err)}
			}
			if len(sel) > 0 && !prune {
				return &exitError{code: applyError, err: fmt.Errorf("apply: --selector narrows --prune; without --prune it would select nothing")}
			}
			docs, err := loadApplyDocs(files, owner)
			if err != nil {
				return &exitError{code: applyError, err: err}
			}
			ac, err := newClient()
			if err != nil {
				return &exitError{code: applyError, err: err}
			}
			c, err := ac.sdk()
			if err != nil {
				return &exitError{code: applyError, err: err}
			}
			ctx := cmd.Context()
			steps, err := makePlan(ctx, c, docs, owner, prune, sel)
			if err != nil {
				return &exitError{code: applyError, err: err}
			}
			out := cmd.OutOrStdout()
			changes := printPlan(out, steps)
			if changes == 0 {
				return nil
			}
			if dryRun {
				fmt.Fprintln(out, "Dry run: nothing written.")
				return &exitError{code: applyChanged}
			}
			if err := runPlan(ctx, c, out, steps); err != nil {
				return &exitError{code: applyError, err: err}
			}
			fmt.Fprintf(out, "Apply complete: %d changed.\n", changes)
			return &exitError{code: applyChanged}
		},
	}
	flagUsage(cmd)
	cmd.Flags().StringArrayVarP(&files, "file", "f", nil, "a YAML or JSON file, or a directory of them (repeatable)")
	cmd.Flags().StringVar(&owner, "owner", "", "label what is applied "+schedule.OwnerLabel+"=NAME (and scope --prune to it)")
	cmd.Flags().BoolVar(&prune, "prune", false, "delete the schedules and calendars of --owner that the files no longer hold")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and write nothing")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "with --prune: only prune objects that also match this label selector: key=value, key!=value, key in (v1,v2), comma-separated, all must match")
	return cmd
}

// makePlan reads what is stored for every document (and, with prune, every
// object of owner) and decides each step. It writes nothing.
func makePlan(ctx context.Context, c *client.Client, docs []*applyDoc, owner string, prune bool, extra schedule.LabelSelector) ([]planStep, error) {
	var steps []planStep
	want := map[string]bool{}
	for _, d := range docs {
		want[d.kind+"/"+d.id()] = true
		var (
			cur, next map[string]any
			version   int64
		)
		switch d.kind {
		case kindSchedule:
			sc, err := c.GetSchedule(ctx, d.id())
			if client.IsNotFound(err) {
				steps = append(steps, planStep{action: actCreate, kind: d.kind, id: d.id(), doc: d})
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("apply: read schedule %s: %w", d.id(), err)
			}
			version = sc.Version
			if err := notTakenOver(d, sc.Labels, owner); err != nil {
				return nil, err
			}
			if cur, err = comparable(sc); err != nil {
				return nil, err
			}
			if next, err = comparable(d.sc); err != nil {
				return nil, err
			}
		case kindCalendar:
			cal, err := c.GetCalendar(ctx, d.id())
			if client.IsNotFound(err) {
				steps = append(steps, planStep{action: actCreate, kind: d.kind, id: d.id(), doc: d})
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("apply: read calendar %s: %w", d.id(), err)
			}
			version = cal.Version
			if err := notTakenOver(d, cal.Labels, owner); err != nil {
				return nil, err
			}
			if cur, err = comparable(cal); err != nil {
				return nil, err
			}
			if next, err = comparable(d.cal); err != nil {
				return nil, err
			}
		}
		patch := mergeDiff(cur, next)
		if len(patch) == 0 {
			steps = append(steps, planStep{action: actUnchanged, kind: d.kind, id: d.id(), doc: d, version: version})
			continue
		}
		steps = append(steps, planStep{action: actUpdate, kind: d.kind, id: d.id(), doc: d, version: version, patch: patch, diff: fieldDiff(cur, next)})
	}
	if !prune {
		return steps, nil
	}
	// --prune's candidates: the owner's objects, narrowed by --selector.
	scope := append(schedule.LabelSelector{schedule.Eq(schedule.OwnerLabel, owner)}, extra...)
	sel := scope.String()
	for sc, err := range c.ListSchedules(ctx, client.ListOptions{LabelSelector: sel, PageOptions: client.PageOptions{PageSize: 500}}) {
		if err != nil {
			return nil, fmt.Errorf("apply: list the schedules of %s: %w", sel, err)
		}
		// The server selected on the label; check it again, so that a
		// server that ignored the selector cannot make prune delete
		// another owner's schedule.
		if scope.Matches(sc.Labels) && !want[kindSchedule+"/"+sc.ID] {
			steps = append(steps, planStep{action: actDelete, kind: kindSchedule, id: sc.ID, version: sc.Version})
		}
	}
	for cal, err := range c.ListCalendars(ctx, client.ListOptions{LabelSelector: sel, PageOptions: client.PageOptions{PageSize: 500}}) {
		if err != nil {
			return nil, fmt.Errorf("apply: list the calendars of %s: %w", sel, err)
		}
		if scope.Matches(cal.Labels) && !want[kindCalendar+"/"+cal.ID] {
			steps = append(steps, planStep{action: actDelete, kind: kindCalendar, id: cal.ID, version: cal.Version})
		}
	}
	return steps, nil
}

// notTakenOver refuses to apply a document over an object another owner
// applied: two repositories claiming one schedule would undo each other's
// changes, and the loser's --prune would delete it.
func notTakenOver(d *applyDoc, stored schedule.Labels, _ string) error {
	have := stored[schedule.OwnerLabel]
	if have != "" && d.owner != "" && have != d.owner {
		return fmt.Errorf("%s: %s %s is owned by %q (label %s), not %q; apply it from its owner, or change the label by hand first",
			d.where("id"), strings.ToLower(d.kind), d.id(), have, schedule.OwnerLabel, d.owner)
	}
	return nil
}

// comparable is v as JSON, without the fields apply does not manage.
func comparable(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("apply: encode: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("apply: decode: %w", err)
	}
	for _, f := range ignoredFields {
		delete(m, f)
	}
	return m, nil
}

// mergeDiff is the JSON merge patch (RFC 7396) that turns cur into next:
// changed values, objects recursively, and null for what next lacks.
func mergeDiff(cur, next map[string]any) map[string]any {
	patch := map[string]any{}
	for k, nv := range next {
		cv, ok := cur[k]
		if ok && reflect.DeepEqual(cv, nv) {
			continue
		}
		cm, cok := cv.(map[string]any)
		nm, nok := nv.(map[string]any)
		if ok && cok && nok {
			if sub := mergeDiff(cm, nm); len(sub) > 0 {
				patch[k] = sub
			}
			continue
		}
		patch[k] = nv
	}
	for k := range cur {
		if _, ok := next[k]; !ok {
			patch[k] = nil
		}
	}
	return patch
}

// fieldDiff lists the changed leaves, one line each: `cron: "a" → "b"`.
func fieldDiff(cur, next map[string]any) []string {
	a, b := map[string]string{}, map[string]string{}
	flatten("", cur, a)
	flatten("", next, b)
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []string
	for _, k := range keys {
		av, aok := a[k]
		bv, bok := b[k]
		switch {
		case aok && bok && av != bv:
			out = append(out, fmt.Sprintf("%s: %s → %s", k, av, bv))
		case aok && !bok:
			out = append(out, fmt.Sprintf("%s: %s → (removed)", k, av))
		case !aok && bok:
			out = append(out, fmt.Sprintf("%s: (none) → %s", k, bv))
		}
	}
	return out
}

func flatten(path string, v any, out map[string]string) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, sv := range m {
			p := k
			if path != "" {
				p = path + "." + k
			}
			flatten(p, sv, out)
		}
		return
	}
	b, _ := json.Marshal(v)
	out[path] = string(b)
}

// printPlan writes the plan and returns how many steps change something.
func printPlan(w io.Writer, steps []planStep) int {
	counts := map[applyAction]int{}
	for _, s := range steps {
		counts[s.action]++
		mark := map[applyAction]string{actCreate: "+", actUpdate: "~", actUnchanged: "=", actDelete: "-"}[s.action]
		fmt.Fprintf(w, "%s %s %s (%s)\n", mark, strings.ToLower(s.kind), s.id, s.action)
		for _, d := range s.diff {
			fmt.Fprintf(w, "    %s\n", d)
		}
	}
	fmt.Fprintf(w, "Plan: %d to create, %d to update, %d unchanged, %d to delete.\n",
		counts[actCreate], counts[actUpdate], counts[actUnchanged], counts[actDelete])
	return counts[actCreate] + counts[actUpdate] + counts[actDelete]
}

// runPlan writes the plan's changes: calendars before the schedules that
// may name them, deletes of schedules before those of calendars. It stops
// at the first failure, saying what was written before it.
func runPlan(ctx context.Context, c *client.Client, w io.Writer, steps []planStep) error {
	order := func(s planStep) int {
		switch {
		case s.action != actDelete && s.kind == kindCalendar:
			return 0
		case s.action != actDelete:
			return 1
		case s.kind == kindSchedule:
			return 2
		}
		return 3
	}
	sorted := slices.Clone(steps)
	slices.SortStableFunc(sorted, func(a, b planStep) int { return order(a) - order(b) })
	done := 0
	for _, s := range sorted {
		if s.action == actUnchanged {
			continue
		}
		if err := runStep(ctx, c, s); err != nil {
			if client.IsPreconditionFailed(err) || client.IsConflict(err) {
				err = fmt.Errorf("%s %s changed since the plan read it (another writer): %w; run apply again to plan from what is stored now", strings.ToLower(s.kind), s.id, err)
			}
			return fmt.Errorf("apply: stopped after %d of the changes: %w", done, err)
		}
		done++
		fmt.Fprintf(w, "%s %s: %sd\n", strings.ToLower(s.kind), s.id, string(s.action))
	}
	return nil
}

func runStep(ctx context.Context, c *client.Client, s planStep) error {
	switch {
	case s.kind == kindSchedule && s.action == actCreate:
		_, err := c.CreateScheduleJSON(ctx, s.doc.sc)
		return err
	case s.kind == kindSchedule && s.action == actUpdate:
		_, err := c.PatchSchedule(ctx, s.id, s.patch, client.IfMatch(s.version))
		return err
	case s.kind == kindSchedule && s.action == actDelete:
		return c.DeleteSchedule(ctx, s.id, client.IfMatch(s.version))
	case s.kind == kindCalendar && s.action == actDelete:
		return c.DeleteCalendar(ctx, s.id, client.IfMatch(s.version))
	case s.kind == kindCalendar:
		// A create must not replace a calendar made meanwhile: PUT has no
		// If-None-Match, so the plan's "none stored" is re-checked by the
		// answer (201).
		_, created, err := c.PutCalendar(ctx, s.doc.cal, client.IfMatch(s.version))
		if err == nil && s.action == actCreate && !created {
			return fmt.Errorf("calendar %s was created by another writer meanwhile, and replaced", s.id)
		}
		return err
	}
	return fmt.Errorf("apply: no way to %s a %s", s.action, s.kind)
}
