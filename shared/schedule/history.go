package schedule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// VersionsCollection holds the history of changes of every schedule: one
// VersionRecord per write (create, update, pause, resume, delete).
const VersionsCollection = "schedule_versions"

// Bounds of history.keep (and of BATON_HISTORY_KEEP): shorter than an hour
// would delete a run before anyone looks at it, and ten years is longer
// than any audit asks for.
const (
	MinKeep     = time.Hour
	MaxKeep     = 3650 * 24 * time.Hour
	DefaultKeep = 30 * 24 * time.Hour
)

// History is a schedule's retention policy: how long its finished runs and
// its change records are kept before they expire.
type History struct {
	// Keep is a duration with an optional "d" (days) unit, such as "30d"
	// or "36h", between MinKeep and MaxKeep; empty means the global default
	// (BATON_HISTORY_KEEP).
	Keep string `bson:"keep,omitempty" json:"keep,omitempty"`
}

// ParseKeep reads a retention duration: Go's duration syntax, plus a
// whole number of days ("30d"). It is bounded to [MinKeep, MaxKeep].
func ParseKeep(s string) (time.Duration, error) {
	var d time.Duration
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("%q is not a duration such as \"30d\" or \"36h\"", s)
		}
		if days > int(MaxKeep/(24*time.Hour)) {
			return 0, fmt.Errorf("%q is more than %dd", s, MaxKeep/(24*time.Hour))
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		v, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration such as \"30d\" or \"36h\"", s)
		}
		d = v
	}
	switch {
	case d < MinKeep:
		return 0, fmt.Errorf("%q is less than %s", s, MinKeep)
	case d > MaxKeep:
		return 0, fmt.Errorf("%q is more than %dd", s, MaxKeep/(24*time.Hour))
	}
	return d, nil
}

// validateHistory checks history.keep.
func (s *Schedule) validateHistory() error {
	if s.History == nil {
		return nil
	}
	if s.History.Keep == "" {
		return fieldErr("history.keep", "is required when history is set (for example \"30d\"); omit history for the default")
	}
	if _, err := ParseKeep(s.History.Keep); err != nil {
		return fieldErr("history.keep", "%v", err)
	}
	return nil
}

// KeepOr is how long this schedule's runs and change records are kept:
// history.keep when set and valid, else def.
func (s *Schedule) KeepOr(def time.Duration) time.Duration {
	if s != nil && s.History != nil {
		if d, err := ParseKeep(s.History.Keep); err == nil {
			return d
		}
	}
	return def
}

// The kinds of change a VersionRecord records.
const (
	ChangeCreate = "create"
	ChangeUpdate = "update"
	ChangePause  = "pause"
	ChangeResume = "resume"
	ChangeDelete = "delete"
)

// Change is one write to a schedule: who made it, when, which version it
// produced, and what it changed. The schedule document carries the change
// that produced its current version (Schedule.LastChange), written by the
// same atomic write, so a write can never land without its change; the
// next write copies it into VersionsCollection before its own
// conditional write (see shared/catalog's doc).
type Change struct {
	// Version is the schedule version the write produced.
	Version int64 `bson:"version" json:"version"`
	// Op is create, update, pause, resume or delete.
	Op string `bson:"op" json:"op"`
	// Actor is who made it: httpapi.Actor's identity, "local" under the
	// local token, "baton" for the scheduler's own timed resume.
	Actor string `bson:"actor" json:"actor"`
	// At is when.
	At time.Time `bson:"at" json:"at"`
	// Diff is every user-visible field the write changed.
	Diff []FieldChange `bson:"diff" json:"diff"`
}

// FieldChange is one changed field: its dotted path in the schedule's JSON
// ("target.http.url"), and its JSON values before and after (empty: the
// field was absent).
type FieldChange struct {
	Field  string `bson:"field" json:"field"`
	Before string `bson:"before,omitempty" json:"-"`
	After  string `bson:"after,omitempty" json:"-"`
}

// MarshalJSON writes before and after as JSON values, not strings; an
// absent side is omitted.
func (f FieldChange) MarshalJSON() ([]byte, error) {
	out := struct {
		Field  string          `json:"field"`
		Before json.RawMessage `json:"before,omitempty"`
		After  json.RawMessage `json:"after,omitempty"`
	}{Field: f.Field}
	if f.Before != "" {
		out.Before = json.RawMessage(f.Before)
	}
	if f.After != "" {
		out.After = json.RawMessage(f.After)
	}
	return json.Marshal(out)
}

// UnmarshalJSON reads what MarshalJSON writes (a client of the API).
func (f *FieldChange) UnmarshalJSON(b []byte) error {
	var in struct {
		Field  string          `json:"field"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	}
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	f.Field, f.Before, f.After = in.Field, string(in.Before), string(in.After)
	return nil
}

// VersionRecord is one record of VersionsCollection: the Change that
// produced a version of a schedule.
type VersionRecord struct {
	// ID is VersionID(ScheduleID, Incarnation, Version): deterministic, so
	// every copy of the same change writes the same document.
	ID         string `bson:"_id" json:"-"`
	ScheduleID string `bson:"scheduleId" json:"scheduleId"`
	// Incarnation is the schedule's createdAt: a schedule deleted and
	// created again starts at version 1 again, and its history must not
	// overwrite the old one's.
	Incarnation time.Time `bson:"incarnation" json:"incarnation"`
	Change      `bson:",inline"`
	// Final marks a copy of a change known to have landed (copied from the
	// schedule document). A record that is not final (a delete's, written
	// before the delete) never overwrites a final one.
	Final bool `bson:"final" json:"-"`
	// ExpireAt is when the record may be deleted (At + the schedule's
	// history.keep): Firestore's TTL policy deletes it in the cloud, the
	// sweep locally.
	ExpireAt time.Time `bson:"expireAt,omitempty" json:"expireAt,omitzero"`
}

// VersionID is the _id of the record of a schedule's version: zero-padded,
// so that the _id order is (schedule, incarnation, version), and one
// keyset on _id lists a schedule's history newest first.
func VersionID(scheduleID string, incarnation time.Time, version int64) string {
	return fmt.Sprintf("%s@%013d@%010d", scheduleID, incarnation.UnixMilli(), version)
}

// Record is the VersionRecord of c for schedule id created at
// incarnation, expiring keep after the change.
func (c Change) Record(id string, incarnation time.Time, keep time.Duration, final bool) *VersionRecord {
	v := &VersionRecord{
		ID: VersionID(id, incarnation, c.Version), ScheduleID: id, Incarnation: incarnation.UTC(),
		Change: c, Final: final,
	}
	if keep > 0 {
		v.ExpireAt = c.At.Add(keep).UTC()
	}
	return v
}

// bookkeeping are the schedule's JSON fields a change does not show: the
// server's own (versions, timestamps, the next fire time, the misfire
// flag). Everything else is what the user set.
var bookkeeping = map[string]bool{"id": true, "version": true, "nextRunAt": true, "createdAt": true, "updatedAt": true, "misfire": true}

// Diff is the field-level difference between two versions of a schedule,
// either of which may be nil (a create, a delete), in the user-visible
// fields only, sorted by field. Objects are compared field by field
// (dotted paths), arrays as whole values.
func Diff(before, after *Schedule) ([]FieldChange, error) {
	b, err := flatJSON(before)
	if err != nil {
		return nil, err
	}
	a, err := flatJSON(after)
	if err != nil {
		return nil, err
	}
	keys := map[string]bool{}
	for k := range b {
		keys[k] = true
	}
	for k := range a {
		keys[k] = true
	}
	out := []FieldChange{}
	for k := range keys {
		if b[k] != a[k] {
			out = append(out, FieldChange{Field: k, Before: b[k], After: a[k]})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Field < out[j].Field })
	return out, nil
}

// flatJSON is s as JSON, flattened to dotted paths, each holding its value
// as compact JSON text.
func flatJSON(s *Schedule) (map[string]string, error) {
	out := map[string]string{}
	if s == nil {
		return out, nil
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("schedule: diff: %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("schedule: diff: %w", err)
	}
	for k, v := range top {
		if !bookkeeping[k] {
			flatten(k, v, out)
		}
	}
	return out, nil
}

func flatten(path string, v json.RawMessage, out map[string]string) {
	v = bytes.TrimSpace(v)
	if len(v) > 0 && v[0] == '{' {
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) == nil {
			for k, sub := range m {
				flatten(path+"."+k, sub, out)
			}
			return
		}
	}
	if string(v) == "null" {
		return
	}
	var buf bytes.Buffer
	if json.Compact(&buf, v) != nil {
		out[path] = string(v)
		return
	}
	out[path] = buf.String()
}
