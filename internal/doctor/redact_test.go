package doctor

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestReportNeverPrintsAPassword: a password in BATON_MONGO_URI (with an
// unescaped "/" the driver refuses) or in BATON_URL reaches neither the
// table nor the JSON.
func TestReportNeverPrintsAPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, c := range []LocalConfig{
		{MongoURI: "mongodb://baton:s3cr/et@127.0.0.1:1/baton", URL: "http://op:s3cret@127.0.0.1:1"},
		{MongoURI: "mongodb://baton:s3cr?et@127.0.0.1:1/baton", URL: "http://op:s3cret@127.0.0.1:1/%zz"},
	} {
		rep := Local(ctx, c)
		var js strings.Builder
		if err := rep.WriteJSON(&js); err != nil {
			t.Fatal(err)
		}
		out := table(rep) + js.String()
		if strings.Contains(out, "s3cr") {
			t.Errorf("a password is printed:\n%s", out)
		}
		if got := row(t, rep, "mongo"); got.Status != Fail || !strings.Contains(got.Detail, "baton:xxxxx@127.0.0.1:1") {
			t.Errorf("mongo: %+v", got)
		}
	}
}
