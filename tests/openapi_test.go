package tests

import (
	"fmt"
	"net/http"
	"os"
	"testing"

	"github.com/baton-cron/baton/shared/openapi/openapitest"
)

// TestMain validates every exchange of this package with the Schedules,
// GPU, GPUCallback and Rent functions against the OpenAPI contract
// (shared/openapi/openapi.yaml): the tests' own requests, the console's
// and the GPU workers' all go through http.DefaultTransport. A drift fails
// the request that shows it (its test stops there, naming it) and, listed
// again at the end, the whole run, in case a client swallowed the error.
func TestMain(m *testing.M) {
	v, err := openapitest.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	v.Install(http.DefaultTransport.(*http.Transport))
	code := m.Run()
	violations, checked := v.Violations()
	for _, s := range violations {
		fmt.Fprintln(os.Stderr, s)
	}
	if len(violations) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d of %d exchanges with the API drifted from shared/openapi/openapi.yaml\n", len(violations), checked)
		code = 1
	} else if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "openapi: %d exchanges with the API match shared/openapi/openapi.yaml\n", checked)
	}
	os.Exit(code)
}
