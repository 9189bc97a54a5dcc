package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestCloudLoggingFields(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, "debug").Warn("lease lost", "holder", "h1")
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("not JSON: %q: %v", buf.String(), err)
	}
	if got["severity"] != "WARNING" || got["message"] != "lease lost" || got["holder"] != "h1" {
		t.Fatalf("fields = %v, want severity=WARNING message=\"lease lost\" holder=h1", got)
	}
	if _, ok := got["level"]; ok {
		t.Fatalf("level key leaked: %v", got)
	}
}

func TestLevelFilters(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, "error").Info("hidden")
	if buf.Len() != 0 {
		t.Fatalf("info logged at error level: %q", buf.String())
	}
}

// TestTextFormat: the text format is key=value lines with the Cloud
// Logging severity name and no JSON; an unknown format is an error.
func TestTextFormat(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewFormat(&buf, FormatText, "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Warn("lease lost", "holder", "h1")
	log.Debug("hidden")
	got := buf.String()
	if !strings.Contains(got, "level=WARNING") || !strings.Contains(got, `msg="lease lost"`) || !strings.Contains(got, "holder=h1") ||
		strings.Contains(got, "{") || strings.Contains(got, "hidden") || strings.Count(got, "\n") != 1 {
		t.Fatalf("text log = %q; want one key=value line with level=WARNING", got)
	}
	buf.Reset()
	log, err = NewFormat(&buf, FormatJSON, "info")
	if err != nil {
		t.Fatal(err)
	}
	log.Info("ready")
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || doc["severity"] != "INFO" || doc["message"] != "ready" {
		t.Fatalf("json log = %q (%v); want severity INFO and message", buf.String(), err)
	}
	if _, err := NewFormat(&buf, "xml", "info"); err == nil {
		t.Fatal("format xml: want an error")
	}
}
