package enumtest_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/internal/enumtest"
)

// TestConstants: Constants finds the enum's constants in each form they are
// declared in (typed, and a conversion), skips other types and test files.
func TestConstants(t *testing.T) {
	t.Parallel()
	got := enumtest.Constants(t, "testdata/color", "Color")
	want := map[string]string{"Red": "red", "Green": "green", "Blue": "blue"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("constants (-want,+got):\n%s", diff)
	}
}

type color string

func (c color) valid() bool { return c == "red" || c == "green" || c == "blue" }

// TestCheck: a list and a Valid that agree with the constants pass.
func TestCheck(t *testing.T) {
	t.Parallel()
	enumtest.Check(t, "testdata/color", "Color", []color{"red", "green", "blue"}, color.valid, "purple")
}
