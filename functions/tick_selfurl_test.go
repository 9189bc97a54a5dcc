package functions

import (
	"net/http/httptest"
	"testing"
)

// TestSelfURLIsTheSchedulersAudience: the partition tasks' target and OIDC
// audience is the URL the coordinating tick reached. In the cloud that is
// Tick's run.app service URL, which the Scheduler job calls and uses as its
// own token's audience (infra/terraform/scheduler.tf), so the partition
// tasks' audience must be that same string, without a trailing "/";
// locally Tick's mount path stays.
func TestSelfURLIsTheSchedulersAudience(t *testing.T) {
	for _, tc := range []struct {
		name, target, proto, want string
	}{
		{"cloud root", "https://baton-tick-abc123-uc.a.run.app/", "https", "https://baton-tick-abc123-uc.a.run.app"},
		{"cloud, no path", "https://baton-tick-abc123-uc.a.run.app", "https", "https://baton-tick-abc123-uc.a.run.app"},
		{"local mount", "http://127.0.0.1:8080/Tick", "", "http://127.0.0.1:8080/Tick"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", tc.target, nil)
			// TLS ends at Google's front end: the function sees plain HTTP
			// and the scheme in X-Forwarded-Proto.
			r.TLS = nil
			if tc.proto != "" {
				r.Header.Set("X-Forwarded-Proto", tc.proto)
			}
			if got := selfURL(r); got != tc.want {
				t.Errorf("selfURL(%s) = %q, want %q", tc.target, got, tc.want)
			}
		})
	}
}
