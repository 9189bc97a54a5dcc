package logging

import (
	"bytes"
	"encoding/json"
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
