package schedule_test

import (
	"errors"
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

// TestParseLabelSelector: equality terms, ANDed, deduplicated, with ==
// as kubectl accepts it; anything else names the field.
func TestParseLabelSelector(t *testing.T) {
	sel, err := schedule.ParseLabelSelector("labelSelector", " team=data, env==prod ,team=data")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(schedule.LabelSelector{"team=data", "env=prod"}, sel); diff != "" {
		t.Errorf("selector (-want,+got):\n%s", diff)
	}
	if !sel.Matches(schedule.Labels{"team": "data", "env": "prod", "x": "y"}) || sel.Matches(schedule.Labels{"team": "data"}) {
		t.Errorf("Matches is not an AND of the terms")
	}
	if sel, err := schedule.ParseLabelSelector("labelSelector", ""); err != nil || sel != nil {
		t.Errorf("empty selector: %v %v", sel, err)
	}
	for _, bad := range []string{"team", "team!=data", "team in (a,b)", "=x", "a b=c", "k=v v", ","} {
		_, err := schedule.ParseLabelSelector("labelSelector", bad)
		var fe *schedule.FieldError
		if !errors.As(err, &fe) || fe.Field != "labelSelector" {
			t.Errorf("%q: %v, want a FieldError naming labelSelector", bad, err)
		}
	}
}
