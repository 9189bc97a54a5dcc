package schedule

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestSizeLimitsDocumented keeps docs/api.md's "Size limits" table on the
// constants: a bound changed here must change there.
func TestSizeLimitsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	kib := func(n int) string { return fmt.Sprintf("%d KiB", n>>10) }
	for _, want := range []string{
		fmt.Sprintf("at most %d (`MaxArgs`)", MaxArgs),
		fmt.Sprintf("name ≤ %d bytes (`MaxArgKeyLen`)", MaxArgKeyLen),
		fmt.Sprintf("value ≤ %s (`MaxArgValueLen`)", kib(MaxArgValueLen)),
		fmt.Sprintf("at most %d (`MaxHeaders`)", MaxHeaders),
		fmt.Sprintf("name ≤ %d bytes (`MaxHeaderNameLen`)", MaxHeaderNameLen),
		fmt.Sprintf("value ≤ %s (`MaxHeaderValueLen`)", kib(MaxHeaderValueLen)),
		fmt.Sprintf("%s (`MaxHTTPBody`)", kib(MaxHTTPBody)),
		fmt.Sprintf("%d / %d / %d bytes", MaxDescription, MaxCronLen, MaxURLLen),
		fmt.Sprintf("%s (`MaxScheduleJSON`)", kib(MaxScheduleJSON)),
	} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/api.md does not say %q", want)
		}
	}
}
