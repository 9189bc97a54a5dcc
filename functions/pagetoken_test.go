package functions_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/functions"
	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// oldKey is the public constant that signed every page token before
// BATON_PAGE_TOKEN_SECRET: anyone could sign with it.
const oldKey = "baton page token v1"

// forge builds a page token from scratch, in store's format (an HMAC of the
// body, then the BSON body: query hash, sort value, _id), signed with key.
func forge(t *testing.T, key, coll string, filter bson.D, sortField string, desc bool, sortVal, id any) string {
	t.Helper()
	qb, err := bson.Marshal(bson.D{{Key: "c", Value: coll}, {Key: "f", Value: filter}, {Key: "s", Value: sortField}, {Key: "d", Value: desc}})
	if err != nil {
		t.Fatal(err)
	}
	qh := sha256.Sum256(qb)
	doc := bson.D{{Key: "q", Value: qh[:8]}}
	if sortVal != nil {
		doc = append(doc, bson.E{Key: "s", Value: sortVal})
	}
	doc = append(doc, bson.E{Key: "i", Value: id})
	body, err := bson.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	m := hmac.New(sha256.New, []byte(key))
	m.Write(body)
	return base64.RawURLEncoding.EncodeToString(append(m.Sum(nil)[:16], body...))
}

// deploy builds the functions from the environment as a deployment does,
// with the given secret, on the shared database db, and serves them.
func deploy(t *testing.T, db, secret string) string {
	t.Helper()
	t.Setenv(config.EnvMongoURI, emutest.MongoURI(t))
	t.Setenv(config.EnvDatabase, db)
	t.Setenv(config.EnvToken, "tok")
	t.Setenv(config.EnvPageSecret, secret)
	d, err := functions.FromEnv(context.Background())
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = d.Store.Close(context.Background()) })
	mux, err := functions.Mux(d)
	if err != nil {
		t.Fatalf("Mux: %v", err)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func call(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestPageTokensNeedTheDeploymentSecret: list tokens are signed with
// BATON_PAGE_TOKEN_SECRET, so a token forged under the old public key, an
// edited token, or a token of another deployment is a 400 naming pageToken,
// never a page (or, with an operator inside, a 500).
func TestPageTokensNeedTheDeploymentSecret(t *testing.T) {
	db := emutest.DBName(t)
	a := deploy(t, db, "deployment A's secret: 0123456789abcdef")
	b := deploy(t, db, "deployment B's secret: 0123456789abcdef")
	for _, id := range []string{"s1", "s2", "s3"} {
		if code, body := call(t, "POST", a+"/Schedules/schedules", `{"id":"`+id+`","cron":"@hourly","target":{"type":"builtin","builtin":{"name":"noop"}}}`); code != 201 {
			t.Fatalf("create %s: %d %s", id, code, body)
		}
	}
	code, body := call(t, "GET", a+"/Schedules/schedules?pageSize=1", "")
	tok := between(body, `"nextPageToken":"`, `"`)
	if code != 200 || tok == "" {
		t.Fatalf("first page: %d %s", code, body)
	}
	if code, body := call(t, "GET", a+"/Schedules/schedules?pageSize=1&pageToken="+tok, ""); code != 200 {
		t.Fatalf("own token: %d %s", code, body)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(tok)
	raw[len(raw)-2] ^= 1
	edited := base64.RawURLEncoding.EncodeToString(raw)

	list := func(base string) string { return base + "/Schedules/schedules?pageSize=1&pageToken=" }
	jobs := func(base string) string { return base + "/GPU/gpu/jobs?pageSize=1&pageToken=" }
	where := bson.D{{Key: "$where", Value: "sleep(100) || true"}}
	tests := []struct {
		name, url, token string
	}{
		{"forged under the old key", list(a), forge(t, oldKey, schedule.SchedulesCollection, bson.D{}, "", false, nil, "s1")},
		{"operator forged under the old key", list(a), forge(t, oldKey, schedule.SchedulesCollection, bson.D{}, "", false, nil, where)},
		{"gpu: operator forged under the old key", jobs(a), forge(t, oldKey, mongostore.GPUJobsCollection, bson.D{}, "createdAt", true, where, "j1")},
		{"edited", list(a), edited},
		{"another deployment's", list(b), tok},
	}
	for _, tc := range tests {
		code, body := call(t, "GET", tc.url+url.QueryEscape(tc.token), "")
		if code != 400 || !strings.Contains(body, "pageToken") {
			t.Errorf("%s: %d %s; want 400 naming pageToken", tc.name, code, body)
		}
	}
}

// TestPageSecretChecks: a short secret stops every function from starting,
// naming the variable; in the cloud (K_SERVICE set) the functions that hand
// out page tokens refuse to start without one, as each instance would draw
// its own key and refuse the others' tokens.
func TestPageSecretChecks(t *testing.T) {
	t.Setenv(config.EnvMongoURI, emutest.MongoURI(t))
	t.Setenv(config.EnvDatabase, emutest.DBName(t))
	t.Setenv(config.EnvPageSecret, "too short")
	if _, err := functions.FromEnv(context.Background()); err == nil || !strings.Contains(err.Error(), config.EnvPageSecret) {
		t.Errorf("short secret: FromEnv = %v, want an error naming %s", err, config.EnvPageSecret)
	}
	t.Setenv(config.EnvPageSecret, "")
	t.Setenv("K_SERVICE", "schedules")
	d, err := functions.FromEnv(context.Background())
	if err != nil {
		t.Fatalf("FromEnv without a secret: %v", err)
	}
	defer d.Store.Close(context.Background())
	_, err = functions.Mux(d)
	if err == nil || !strings.Contains(err.Error(), config.EnvPageSecret) {
		t.Errorf("in the cloud without a secret: Mux = %v, want an error naming %s", err, config.EnvPageSecret)
	}
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}
