package tests

import (
	"os"
	"strings"
	"testing"

	"github.com/baton-cron/baton/shared/config"
)

// TestReadmeConfigReference keeps the README's configuration reference true:
// every variable the code reads is documented there.
func TestReadmeConfigReference(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, v := range config.Vars {
		if !strings.Contains(readme, "`"+v.Name+"`") {
			t.Errorf("README.md does not document %s (%s)", v.Name, v.Doc)
		}
	}
}

// TestReadmeCommands checks that the two front-door commands are the ones the
// Makefile and CI use.
func TestReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"make run", "make test"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README.md does not mention %q", want)
		}
	}
	for _, target := range []string{"\nrun:", "\ntest:"} {
		if !strings.Contains(string(mk), target) {
			t.Errorf("Makefile has no %q target", strings.TrimSpace(target))
		}
	}
	if !strings.Contains(string(ci), "make test") {
		t.Error(".ci/run does not call make test")
	}
}
