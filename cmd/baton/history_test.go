package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSchedulesHistoryCLI: `schedules history` lists the change records
// newest first, with the changed fields, as a table and as JSON; `versions`
// is the same command.
func TestSchedulesHistoryCLI(t *testing.T) {
	t.Parallel()
	b := setupCLI(t)
	b.ok(t, "schedules", "create", "--id", "h", "--cron", "30 2 * * *", "--target-url", "https://api.example.com/h")
	b.ok(t, "schedules", "update", "h", "--cron", "45 3 * * *")
	b.ok(t, "schedules", "pause", "h")
	out := b.ok(t, "schedules", "history", "h")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "VERSION") {
		t.Fatalf("history table:\n%s", out)
	}
	for i, want := range []string{"3  pause", "2  update", "1  create"} {
		if !strings.Contains(strings.Join(strings.Fields(lines[i+1])[:2], "  "), want) {
			t.Errorf("row %d = %q, want %q", i+1, lines[i+1], want)
		}
	}
	if !strings.Contains(lines[2], `cron: "30 2 * * *" → "45 3 * * *"`) {
		t.Errorf("update row %q does not show the cron change", lines[2])
	}
	var page struct {
		Versions []struct {
			Version int64  `json:"version"`
			Op      string `json:"op"`
			Actor   string `json:"actor"`
			Diff    []struct {
				Field  string          `json:"field"`
				Before json.RawMessage `json:"before"`
				After  json.RawMessage `json:"after"`
			} `json:"diff"`
		} `json:"versions"`
	}
	js := b.ok(t, "schedules", "versions", "h", "-o", "json", "--all")
	if err := json.Unmarshal([]byte(js), &page); err != nil {
		t.Fatalf("-o json: %v\n%s", err, js)
	}
	if len(page.Versions) != 3 || page.Versions[1].Op != "update" || page.Versions[1].Actor == "" {
		t.Fatalf("-o json: %s", js)
	}
	found := false
	for _, d := range page.Versions[1].Diff {
		if d.Field == "cron" && string(d.Before) == `"30 2 * * *"` && string(d.After) == `"45 3 * * *"` {
			found = true
		}
	}
	if !found {
		t.Errorf("-o json update diff %+v has no cron before/after", page.Versions[1].Diff)
	}
	if _, _, err := b.run(t, "", "schedules", "history"); exitCode(err) != 2 {
		t.Errorf("history without an id: exit %d, want 2", exitCode(err))
	}
}
