package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	cloudtasks "cloud.google.com/go/cloudtasks/apiv2"
	"cloud.google.com/go/cloudtasks/apiv2/cloudtaskspb"
	"cloud.google.com/go/storage"
	"go.mongodb.org/mongo-driver/v2/bson"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/baton-cron/baton/shared/store/mongostore"
)

// LocalConfig names what `baton local` started: the values of the env file
// it writes (DATA_DIR/env).
type LocalConfig struct {
	// MongoURI is BATON_MONGO_URI; Database overrides the URI's database
	// (BATON_DATABASE).
	MongoURI, Database string
	// StorageHost is STORAGE_EMULATOR_HOST; Bucket is BATON_BUCKET.
	StorageHost, Bucket string
	// TasksHost is CLOUD_TASKS_EMULATOR_HOST; TasksQueue is
	// BATON_TASKS_QUEUE.
	TasksHost, TasksQueue string
	// URL is BATON_URL; Token is BATON_TOKEN.
	URL, Token string
	// HTTPClient asks /healthz; nil means one with a 10s timeout.
	HTTPClient *http.Client
}

// localHint is the fix for an emulator that does not answer.
const localHint = "start it with baton local, then . DATA_DIR/env (default .baton/env) in this shell"

// Local checks the emulators of `baton local`. Everything is a line of the
// report; nothing is an error.
func Local(ctx context.Context, c LocalConfig) *Report {
	r := &Report{Mode: "local"}
	localMongo(ctx, c, r)
	r.skip("mongo: change stream", "the MongoDB API emulator (FerretDB) has no change streams; locally baton daemon polls")
	localBucket(ctx, c, r)
	localTasks(ctx, c, r)
	localHealth(ctx, c, r)
	return r.finish()
}

func localMongo(ctx context.Context, c LocalConfig, r *Report) {
	const name = "mongo"
	if c.MongoURI == "" {
		r.fail(name, "BATON_MONGO_URI is unset", localHint)
		skipIndexes(r, "no database")
		return
	}
	st, err := mongostore.Open(ctx, c.MongoURI, mongostore.Options{Database: c.Database, ConnectTimeout: 5 * time.Second})
	if err != nil {
		r.fail(name, err.Error(), localHint)
		skipIndexes(r, "the database did not answer")
		return
	}
	defer st.Close(context.WithoutCancel(ctx))
	r.pass(name, "database "+st.DatabaseName()+" answers")

	listed := map[string][]bson.Raw{}
	for _, ix := range Needed() {
		name := indexName(ix)
		keys, seen := listed[ix.Collection]
		if !seen {
			var err error
			if keys, err = st.IndexKeys(ctx, ix.Collection); err != nil {
				r.fail(name, err.Error(), localHint)
				continue
			}
			listed[ix.Collection] = keys
		}
		if hasKeys(keys, ix) {
			r.pass(name, keysText(ix))
			continue
		}
		r.fail(name, "missing: no index on "+ix.Collection+" "+keysText(ix),
			"restart baton local (it creates every index at start), or: mongosh \"$BATON_MONGO_URI\" --eval 'db."+ix.Collection+".createIndex("+mongoKeys(ix)+", {name: \""+ix.Name+"\"})'")
	}
}

// hasKeys reports whether one of the listed key documents is ix's keys, in
// order, whatever number type the server wrote the directions in.
func hasKeys(listed []bson.Raw, ix mongostore.Index) bool {
	for _, raw := range listed {
		elems, err := raw.Elements()
		if err != nil || len(elems) != len(ix.Keys) {
			continue
		}
		same := true
		for i, e := range elems {
			if e.Key() != ix.Keys[i].Key || rawDirection(e.Value()) != direction(ix.Keys[i].Value) {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

func rawDirection(v bson.RawValue) int64 {
	if n, ok := v.AsInt64OK(); ok {
		return n
	}
	if f, ok := v.DoubleOK(); ok {
		return int64(f)
	}
	return 0
}

// mongoKeys writes an index's keys as a mongosh document.
func mongoKeys(ix mongostore.Index) string {
	parts := make([]string, 0, len(ix.Keys))
	for _, k := range ix.Keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k.Key, direction(k.Value)))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

func localBucket(ctx context.Context, c LocalConfig, r *Report) {
	const name = "bucket"
	switch {
	case c.StorageHost == "":
		r.fail(name, "STORAGE_EMULATOR_HOST is unset", localHint)
		return
	case c.Bucket == "":
		r.fail(name, "BATON_BUCKET is unset", localHint)
		return
	}
	cl, err := storage.NewClient(ctx, option.WithEndpoint("http://"+c.StorageHost+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		r.fail(name, fmt.Sprintf("open the storage client: %v", err), localHint)
		return
	}
	defer cl.Close()
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	attrs, err := cl.Bucket(c.Bucket).Attrs(actx)
	if err != nil {
		fix := localHint
		if errors.Is(err, storage.ErrBucketNotExist) {
			fix = "restart baton local with --bucket " + c.Bucket + " (it creates the bucket at start)"
		}
		r.fail(name, fmt.Sprintf("gs://%s on %s: %v", c.Bucket, c.StorageHost, err), fix)
		return
	}
	// The emulator (fake-gcs-server) keeps versioning but has no uniform
	// access or lifecycle rules to check.
	r.check(!attrs.VersioningEnabled, name, fmt.Sprintf("gs://%s on %s, versioning %s", c.Bucket, c.StorageHost, onOff(attrs.VersioningEnabled)),
		"restart baton local with --fresh (the bucket it creates is unversioned)")
}

func localTasks(ctx context.Context, c LocalConfig, r *Report) {
	const name = "tasks queue"
	if c.TasksHost == "" {
		r.skip(name, "CLOUD_TASKS_EMULATOR_HOST is unset: nothing hands runs to a queue here")
		return
	}
	if c.TasksQueue == "" {
		r.fail(name, "BATON_TASKS_QUEUE is unset", localHint)
		return
	}
	cl, err := cloudtasks.NewClient(ctx, option.WithEndpoint(c.TasksHost), option.WithoutAuthentication(),
		option.WithGRPCDialOption(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		r.fail(name, fmt.Sprintf("open the Cloud Tasks client: %v", err), localHint)
		return
	}
	defer cl.Close()
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	q, err := cl.GetQueue(qctx, &cloudtaskspb.GetQueueRequest{Name: c.TasksQueue})
	if err != nil {
		r.fail(name, fmt.Sprintf("get %s on %s: %v", c.TasksQueue, c.TasksHost, err), localHint)
		return
	}
	r.check(q.GetState() == cloudtaskspb.Queue_RUNNING, name, fmt.Sprintf("%s on %s %s", q.GetName(), c.TasksHost, q.GetState()),
		"restart baton local (its queue starts RUNNING)")
}

func localHealth(ctx context.Context, c LocalConfig, r *Report) {
	const name = "http: /healthz"
	if c.URL == "" {
		r.fail(name, "BATON_URL is unset", localHint)
		return
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	target := strings.TrimRight(c.URL, "/") + "/healthz"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		// The parse error quotes the URL whole, password and all.
		r.fail(name, "BATON_URL is not a URL", localHint)
		return
	}
	// A BATON_URL with user:password@ must not reach the report.
	u := req.URL.Redacted()
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		r.fail(name, fmt.Sprintf("GET %s: %v", u, err), localHint)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var h struct {
		Status string `json:"status"`
	}
	said := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &h) == nil && h.Status != "" {
		said = "status " + h.Status
	}
	r.check(resp.StatusCode == http.StatusOK, name, fmt.Sprintf("GET %s: %d, %s", u, resp.StatusCode, said),
		"read baton local's log (stderr): /healthz answers 503 while ticks fail")
}
