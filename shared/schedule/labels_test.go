package schedule_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/shared/schedule"
)

// TestLabelsBSON: labels are stored as sorted "key=value" pairs (so one
// multikey index serves equality on any label), and read back as the
// map; no labels store no field.
func TestLabelsBSON(t *testing.T) {
	in := schedule.Calendar{ID: "c", Labels: schedule.Labels{"team": "data", "baton.dev/owner": "repo", "empty": ""}}
	b, err := bson.Marshal(&in)
	if err != nil {
		t.Fatal(err)
	}
	var raw bson.M
	if err := bson.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(bson.A{"baton.dev/owner=repo", "empty=", "team=data"}, raw["labels"]); diff != "" {
		t.Errorf("stored labels (-want,+got):\n%s", diff)
	}
	var out schedule.Calendar
	if err := bson.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in.Labels, out.Labels); diff != "" {
		t.Errorf("labels read back (-want,+got):\n%s", diff)
	}
	b, err = bson.Marshal(&schedule.Calendar{ID: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bson.Raw(b).LookupErr("labels"); err == nil {
		t.Errorf("a calendar without labels stores a labels field: %s", bson.Raw(b))
	}
}

// TestParseLabelSelector: kubectl's terms (=, ==, !=, in), ANDed,
// deduplicated, commas inside in's parentheses kept in the term;
// anything else names the field with the reason.
func TestParseLabelSelector(t *testing.T) {
	sel, err := schedule.ParseLabelSelector("labelSelector", " team=data, env==prod ,team=data, tier!=gold, zone in ( eu , us,eu ),ex.com/k!=")
	if err != nil {
		t.Fatal(err)
	}
	want := schedule.LabelSelector{
		schedule.Eq("team", "data"),
		schedule.Eq("env", "prod"),
		{Key: "tier", Op: schedule.LabelNotEquals, Values: []string{"gold"}},
		{Key: "zone", Op: schedule.LabelIn, Values: []string{"eu", "us"}},
		{Key: "ex.com/k", Op: schedule.LabelNotEquals, Values: []string{""}},
	}
	if diff := cmp.Diff(want, sel); diff != "" {
		t.Errorf("selector (-want,+got):\n%s", diff)
	}
	if got := sel.String(); got != "team=data,env=prod,tier!=gold,zone in (eu,us),ex.com/k!=" {
		t.Errorf("String() = %q", got)
	}
	if again, err := schedule.ParseLabelSelector("labelSelector", sel.String()); err != nil || !cmp.Equal(sel, again) {
		t.Errorf("String() does not parse back: %v, %v", again, err)
	}
	if _, err := schedule.ParseLabelSelector("labelSelector", manyValues(schedule.MaxSelectorValues)); err != nil {
		t.Errorf("%d values: %v", schedule.MaxSelectorValues, err)
	}
	if sel, err := schedule.ParseLabelSelector("labelSelector", ""); err != nil || sel != nil {
		t.Errorf("empty selector: %v %v", sel, err)
	}
	for _, tc := range []struct{ in, reason string }{
		{"team", "want key=value"},
		{"!team", "want key=value"},
		{"team notin (a,b)", "notin is not supported"},
		{"team in ()", "at least one value"},
		{"team in (a,(b))", "nested"},
		{"team in (a,b", "without ')'"},
		{"team in a,b)", "without '('"},
		{"team in (a,b c)", "invalid label value"},
		{"=x", "invalid label key"},
		{"!=x", "invalid label key"},
		{"a b=c", "invalid label key"},
		{"k=v v", "invalid label value"},
		{"k!=v v", "invalid label value"},
		{",", "empty term"},
		{"a=b,", "empty term"},
		{manyValues(schedule.MaxSelectorValues + 1), "at most"},
	} {
		_, err := schedule.ParseLabelSelector("labelSelector", tc.in)
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != "labelSelector" || !strings.Contains(fe.Error(), tc.reason) {
			t.Errorf("%q: %v, want a FieldError naming labelSelector with %q", tc.in, err, tc.reason)
		}
	}
}

// manyValues is an in term of n distinct values.
func manyValues(n int) string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprint("v", i)
	}
	return "k in (" + strings.Join(vs, ",") + ")"
}

// TestLabelSelectorMatches: = needs the label with the value, != keeps
// what lacks the label (kubectl's rule), in needs the label with one of
// the values, and the terms are ANDed.
func TestLabelSelectorMatches(t *testing.T) {
	sel, err := schedule.ParseLabelSelector("labelSelector", "team!=data,env in (prod,staging)")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels schedule.Labels
		want   bool
	}{
		{schedule.Labels{"env": "prod"}, true},
		{schedule.Labels{"env": "staging", "team": "web"}, true},
		{schedule.Labels{"env": "prod", "team": "data"}, false},
		{schedule.Labels{"env": "dev"}, false},
		{schedule.Labels{"team": "web"}, false},
		{nil, false},
	} {
		if got := sel.Matches(tc.labels); got != tc.want {
			t.Errorf("%s on %v: %v, want %v", sel, tc.labels, got, tc.want)
		}
	}
	if ne, _ := schedule.ParseLabelSelector("l", "team!=data"); !ne.Matches(nil) {
		t.Errorf("team!=data does not match an object without labels")
	}
}
