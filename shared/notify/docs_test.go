package notify_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestDocsShowTheTestedCode: docs/notifications.md shows Verify (and the
// mac it calls) exactly as this package has it, and the receiver exactly
// as ExampleVerify runs it, so that the code people copy is the code that
// is tested.
func TestDocsShowTheTestedCode(t *testing.T) {
	t.Parallel()
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	doc := read("../../docs/notifications.md")
	src := read("notify.go")
	for _, name := range []string{"Verify", "mac"} {
		fn := regexp.MustCompile(`(?ms)^func ` + name + `\(.*?^}\n`).FindString(src)
		if fn == "" {
			t.Fatalf("func %s not found in notify.go", name)
		}
		if !strings.Contains(doc, fn) {
			t.Errorf("docs/notifications.md does not show func %s as notify.go has it:\n%s", name, fn)
		}
	}
	ex := regexp.MustCompile(`(?ms)^\treceiver := http.HandlerFunc\(.*?^\t}\)\n`).FindString(read("example_verify_test.go"))
	if ex == "" {
		t.Fatal("the receiver not found in example_verify_test.go")
	}
	ex = strings.TrimPrefix(strings.ReplaceAll(ex, "\n\t", "\n"), "\t")
	if !strings.Contains(doc, ex) {
		t.Errorf("docs/notifications.md does not show the receiver as ExampleVerify runs it:\n%s", ex)
	}
}
