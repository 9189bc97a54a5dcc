package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/scheduler"
)

// Kinds of apply documents.
const (
	kindSchedule = "Schedule"
	kindCalendar = "Calendar"
)

// maxApplyFile bounds one file read by apply: a repository of schedules,
// not a data dump.
const maxApplyFile = 8 << 20

// applyDoc is one document of an apply file: a schedule or a calendar as
// the API takes it, with where it came from.
type applyDoc struct {
	kind  string
	file  string
	index int // 1-based position in its file
	line  int // the document's first line
	owner string
	// body is the object as JSON, without kind and metadata.
	body []byte
	// lines maps a field path, as FieldError names it, to its line.
	lines map[string]int
	sc    *schedule.Schedule
	cal   *schedule.Calendar
}

// id is the object's id.
func (d *applyDoc) id() string {
	if d.sc != nil {
		return d.sc.ID
	}
	return d.cal.ID
}

// where names the document for an error: file:line (document n).
func (d *applyDoc) where(field string) string {
	line := d.line
	for f := field; f != ""; f = parentPath(f) {
		if l, ok := d.lines[f]; ok {
			line = l
			break
		}
	}
	return fmt.Sprintf("%s:%d (document %d)", d.file, line, d.index)
}

// parentPath cuts the last element of a field path: "target.http.url" →
// "target.http", "notify.on[1]" → "notify.on", `labels["a b"]` → "labels".
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		if i := strings.LastIndex(p, "["); i >= 0 {
			return p[:i]
		}
	}
	if i := strings.LastIndex(p, "."); i >= 0 {
		return p[:i]
	}
	return ""
}

// applyFiles lists the files to read: each path itself, or a directory's
// *.yaml, *.yml and *.json files (not its subdirectories), in name order.
func applyFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("apply: %w", err)
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("apply: read directory %s: %w", p, err)
		}
		for _, e := range ents {
			switch strings.ToLower(filepath.Ext(e.Name())) {
			case ".yaml", ".yml", ".json":
				if !e.IsDir() {
					out = append(out, filepath.Join(p, e.Name()))
				}
			}
		}
	}
	return out, nil
}

// serverFields are set by the server; a file that sets one is refused, so
// that a file never claims to set what apply would ignore. (baton export
// leaves them out.)
var serverFields = []string{"nextRunAt", "misfire", "version", "createdAt", "updatedAt", "pausedBy", "pausedAt"}

// loadApplyDocs reads every document of every file, strictly, and checks
// each as the API would, so that a bad document stops the apply before
// anything is written. owner is --owner ("" when not given).
func loadApplyDocs(paths []string, owner string) ([]*applyDoc, error) {
	files, err := applyFiles(paths)
	if err != nil {
		return nil, err
	}
	var docs []*applyDoc
	seen := map[string]*applyDoc{}
	for _, f := range files {
		ds, err := readApplyFile(f)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			if err := d.check(owner); err != nil {
				return nil, err
			}
			key := d.kind + "/" + d.id()
			if prev, ok := seen[key]; ok {
				return nil, fmt.Errorf("%s: %s %q is also in %s", d.where("id"), d.kind, d.id(), prev.where("id"))
			}
			seen[key] = d
			docs = append(docs, d)
		}
	}
	return docs, nil
}

// readApplyFile splits a YAML or JSON file into its documents.
func readApplyFile(name string) ([]*applyDoc, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("apply: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxApplyFile+1))
	if err != nil {
		return nil, fmt.Errorf("apply: read %s: %w", name, err)
	}
	if len(data) > maxApplyFile {
		return nil, fmt.Errorf("apply: %s is over %d bytes", name, maxApplyFile)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*applyDoc
	for i := 1; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			// yaml's errors say "yaml: line N: …".
			return nil, fmt.Errorf("%s: document %d: %w", name, i, err)
		}
		if len(n.Content) == 0 || (n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
			i-- // an empty document (a trailing ---) is not counted
			continue
		}
		d, err := toApplyDoc(name, i, n.Content[0])
		if err != nil {
			return nil, err
		}
		docs = append(docs, d)
	}
}

// toApplyDoc reads one document's kind and metadata and turns the rest
// into JSON, remembering each field's line.
func toApplyDoc(file string, index int, n *yaml.Node) (*applyDoc, error) {
	d := &applyDoc{file: file, index: index, line: n.Line, lines: map[string]int{}}
	at := func(line int, format string, args ...any) error {
		return fmt.Errorf("%s:%d (document %d): %s", file, line, index, fmt.Sprintf(format, args...))
	}
	if n.Kind != yaml.MappingNode {
		return nil, at(n.Line, "a document must be a mapping with kind: %s or %s", kindSchedule, kindCalendar)
	}
	body := map[string]any{}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return nil, at(k.Line, "%s: appears more than once", k.Value)
		}
		seen[k.Value] = true
		switch k.Value {
		case "kind":
			if v.Kind != yaml.ScalarNode || (v.Value != kindSchedule && v.Value != kindCalendar) {
				return nil, at(v.Line, "kind: want %s or %s, not %q", kindSchedule, kindCalendar, v.Value)
			}
			d.kind = v.Value
		case "metadata":
			if v.Kind != yaml.MappingNode {
				return nil, at(v.Line, "metadata: want a mapping {owner: NAME}")
			}
			for j := 0; j+1 < len(v.Content); j += 2 {
				mk, mv := v.Content[j], v.Content[j+1]
				if mk.Value != "owner" {
					return nil, at(mk.Line, "metadata.%s: unknown field; metadata has only owner", mk.Value)
				}
				if mv.Kind != yaml.ScalarNode || mv.Tag != "!!str" {
					return nil, at(mv.Line, "metadata.owner: want a string")
				}
				if why := schedule.ValidateLabelValue(mv.Value); why != "" || mv.Value == "" {
					return nil, at(mv.Line, "metadata.owner %q: it becomes the label %s, so %s", mv.Value, schedule.OwnerLabel, cmpOr(why, "it must not be empty"))
				}
				d.owner = mv.Value
			}
		default:
			if slices.Contains(serverFields, k.Value) {
				return nil, at(k.Line, "%s: set by the server; leave it out of the file", k.Value)
			}
			val, err := yamlValue(v, httpapi.FieldPath("", k.Value), d.lines)
			if err != nil {
				return nil, at(v.Line, "%v", err)
			}
			d.lines[httpapi.FieldPath("", k.Value)] = k.Line
			body[k.Value] = val
		}
	}
	if d.kind == "" {
		return nil, at(n.Line, "kind is required: %s or %s", kindSchedule, kindCalendar)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, at(n.Line, "encode: %v", err)
	}
	d.body = b
	return d, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// yamlValue converts a YAML node to the value encoding/json would decode
// from the same document, recording the line of every field under path.
// Timestamps stay strings ("2026-12-25" is a calendar date, not a time).
func yamlValue(n *yaml.Node, path string, lines map[string]int) (any, error) {
	switch n.Kind {
	case yaml.AliasNode:
		return yamlValue(n.Alias, path, lines)
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("%s: a key must be a string", path)
			}
			p := httpapi.FieldPath(path, k.Value)
			if _, dup := m[k.Value]; dup {
				lines[p] = k.Line
				return nil, fmt.Errorf("%s: appears more than once", p)
			}
			lines[p] = k.Line
			val, err := yamlValue(v, p, lines)
			if err != nil {
				return nil, err
			}
			m[k.Value] = val
		}
		return m, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = c.Line
			val, err := yamlValue(c, p, lines)
			if err != nil {
				return nil, err
			}
			out = append(out, val)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil, nil
		case "!!bool":
			var b bool
			if err := n.Decode(&b); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return b, nil
		case "!!int":
			var i int64
			if err := n.Decode(&i); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return json.Number(strconv.FormatInt(i, 10)), nil
		case "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return json.Number(strconv.FormatFloat(f, 'g', -1, 64)), nil
		default: // !!str, !!timestamp, !!binary: the text as written
			return n.Value, nil
		}
	}
	return nil, fmt.Errorf("%s: unsupported YAML node", path)
}

// check decodes the document strictly and validates it as the API would
// (defaults, every bound), naming file:line and the field on a problem,
// and marks it with its owner.
func (d *applyDoc) check(flagOwner string) error {
	owner := d.owner
	switch {
	case flagOwner != "" && owner != "" && owner != flagOwner:
		return fmt.Errorf("%s: metadata.owner %q differs from --owner %q", d.where(""), owner, flagOwner)
	case flagOwner != "":
		owner = flagOwner
	}
	d.owner = owner
	fail := func(err error) error {
		var fe *schedule.FieldError
		if errors.As(err, &fe) {
			if fe.Field == "" {
				return fmt.Errorf("%s: %s", d.where(""), fe.Reason)
			}
			return fmt.Errorf("%s: %s: %s", d.where(fe.Field), fe.Field, fe.Reason)
		}
		return fmt.Errorf("%s: %w", d.where(""), err)
	}
	switch d.kind {
	case kindSchedule:
		sc, err := schedule.DecodeSchedule(bytes.NewReader(d.body))
		if err != nil {
			return fail(err)
		}
		if sc.ID == "" {
			return fail(&schedule.FieldError{Field: "id", Reason: "is required: apply finds the schedule by its id"})
		}
		if err := markOwner(&sc.Labels, owner); err != nil {
			return fail(err)
		}
		// The deployment's allowlist of target hosts is the server's: here
		// each URL allows itself, and the server still refuses a host
		// that is not on BATON_ALLOWED_TARGETS.
		if err := sc.Normalize(schedule.ValidateOptions{AllowedHosts: ownHosts(sc), Builtins: scheduler.Builtins()}); err != nil {
			return fail(err)
		}
		d.sc = sc
	case kindCalendar:
		cal, err := schedule.DecodeCalendar(bytes.NewReader(d.body))
		if err != nil {
			return fail(err)
		}
		if cal.ID == "" {
			return fail(&schedule.FieldError{Field: "id", Reason: "is required: apply finds the calendar by its id"})
		}
		if err := markOwner(&cal.Labels, owner); err != nil {
			return fail(err)
		}
		if err := cal.Validate(); err != nil {
			return fail(err)
		}
		d.cal = cal
	}
	return nil
}

// markOwner sets the owner label; a file that sets it itself, to another
// owner, is refused.
func markOwner(l *schedule.Labels, owner string) error {
	if owner == "" {
		return nil
	}
	if v, ok := (*l)[schedule.OwnerLabel]; ok && v != owner {
		return &schedule.FieldError{Field: httpapi.FieldPath("labels", schedule.OwnerLabel), Reason: fmt.Sprintf("is %q, but the owner is %q", v, owner)}
	}
	if *l == nil {
		*l = schedule.Labels{}
	}
	(*l)[schedule.OwnerLabel] = owner
	return nil
}

// ownHosts allows the hosts the schedule's own URLs name, so local
// validation checks everything but the deployment's allowlist.
func ownHosts(sc *schedule.Schedule) []string {
	var hosts []string
	add := func(raw string) {
		if i := strings.Index(raw, "://"); i >= 0 {
			rest := raw[i+3:]
			if j := strings.IndexAny(rest, "/?#"); j >= 0 {
				rest = rest[:j]
			}
			if rest != "" {
				hosts = append(hosts, schedule.PrivatePrefix+rest)
			}
		}
	}
	if sc.Target.HTTP != nil {
		add(sc.Target.HTTP.URL)
	}
	if sc.Notify != nil && sc.Notify.Webhook != nil {
		add(sc.Notify.Webhook.URL)
	}
	return hosts
}
