package gpu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
)

// Outputs reads the objects GPU workers write to the deployment's bucket
// (OutputObject). It is an interface so that this package stays free of a
// storage client: functions/gpu.go gives the GPU function one over
// Cloud Storage.
type Outputs interface {
	// Open returns a reader of the object and its size in bytes, or an
	// error matching fs.ErrNotExist when the object does not exist.
	Open(ctx context.Context, object string) (io.ReadCloser, int64, error)
}

// The streams a worker stores for each attempt of a job.
const (
	StreamStdout = "stdout"
	StreamStderr = "stderr"
)

// MaxLogBytes caps GET /gpu/jobs/{id}/logs: the first 32 MiB less a
// little, the largest answer a Cloud Function can return. A longer
// object is cut there and the answer carries LogTruncatedHeader with the
// object's full size; read the rest from the bucket.
const MaxLogBytes = 32<<20 - 64<<10

// Headers of a logs answer.
const (
	// LogAttemptHeader is the attempt whose stream the answer holds (the
	// default attempt is worked out from the job).
	LogAttemptHeader = "Baton-Attempt"
	// LogTruncatedHeader, when present, is the object's full size: the
	// body is its first MaxLogBytes.
	LogTruncatedHeader = "Baton-Truncated"
)

// envBucket names the setting that gives the GPU function its bucket
// (config.EnvBucket; shared/config is not imported here for one string).
const envBucket = "BATON_BUCKET"

// OutputObject is the name of the object a worker writes a job's stream
// to: outputs/<id>/<attempt>/<stream>, as shared/gpu/worker writes it.
func OutputObject(id string, attempt int, stream string) string {
	return fmt.Sprintf("outputs/%s/%d/%s", id, attempt, stream)
}

// safeOutputID reports whether id can name a job's output objects without
// leaving outputs/<id>/: one path segment, and not a dot segment. Job ids
// are narrower still (idPattern, or "run-" and a run id), but the check
// here is what keeps the object name inside the prefix whatever the ids
// become.
func safeOutputID(id string) bool {
	return id != "" && id != "." && id != ".." && len(id) <= 512 &&
		!strings.ContainsAny(id, "/\\:?#") && !strings.ContainsFunc(id, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// LatestAttempt is the attempt whose output GET /gpu/jobs/{id}/logs shows
// by default: the one named by the job's output (gs://…/outputs/<id>/<N>/,
// set by the completion), else the attempt under way or completed under
// the job's fence (attempts+1, while the epoch is set), else the last one
// taken back (attempts), and 1 for a job that never ran.
func LatestAttempt(j Job) int {
	if i := strings.LastIndex(j.Output, "/outputs/"+j.ID+"/"); i >= 0 {
		rest := strings.TrimSuffix(j.Output[i+len("/outputs/"+j.ID+"/"):], "/")
		if n, err := strconv.Atoi(rest); err == nil && n > 0 {
			return n
		}
	}
	if j.Epoch > 0 {
		return j.Attempts + 1
	}
	return max(j.Attempts, 1)
}

// logsRoute serves GET /gpu/jobs/{id}/logs?stream=stdout|stderr&attempt=N:
// the object the worker wrote, as text, streamed.
func logsRoute(d *Dispatcher, w http.ResponseWriter, r *http.Request, id string) error {
	if err := only(w, r, http.MethodGet); err != nil {
		return err
	}
	q := r.URL.Query()
	if err := httpapi.KnownParams(q, []string{"stream", "attempt"}); err != nil {
		return err
	}
	stream := q.Get("stream")
	if stream == "" {
		stream = StreamStdout
	}
	if stream != StreamStdout && stream != StreamStderr {
		return httpapi.BadRequest("stream", "must be stdout or stderr, not %q", stream)
	}
	attempt := 0
	if s := q.Get("attempt"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxMaxAttempts {
			return httpapi.BadRequest("attempt", "must be an attempt number from 1 to %d, not %q", MaxMaxAttempts, s)
		}
		attempt = n
	}
	if !safeOutputID(id) {
		return httpapi.BadRequest("id", "%q is not a job id", id)
	}
	if d.cfg.Outputs == nil {
		return errcode.New(errcode.Unavailable, envBucket+" is not set for this function; the job logs are read from the bucket the workers write to")
	}
	ctx := r.Context()
	job, err := d.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return httpapi.NotFound("no GPU job %q", id)
	}
	if err != nil {
		return err
	}
	if attempt == 0 {
		attempt = LatestAttempt(job)
	}
	// The name is built here, never taken from the job's output field: a
	// job record does not choose which bucket or object is read.
	rc, size, err := d.cfg.Outputs.Open(ctx, OutputObject(id, attempt, stream))
	if errors.Is(err, fs.ErrNotExist) {
		return httpapi.NotFound("job %s has no %s for attempt %d yet: a worker writes it when the command ends", id, stream, attempt)
	}
	if err != nil {
		return fmt.Errorf("gpu: logs of %s: %w", id, err)
	}
	defer rc.Close()
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	// The bytes are the command's: never let a browser sniff them as HTML.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set(LogAttemptHeader, strconv.Itoa(attempt))
	n := size
	if size > MaxLogBytes {
		h.Set(LogTruncatedHeader, strconv.FormatInt(size, 10))
		n = MaxLogBytes
	}
	if n >= 0 {
		h.Set("Content-Length", strconv.FormatInt(n, 10))
	}
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, io.LimitReader(rc, MaxLogBytes)); err != nil {
		// The status is sent; all that is left is to say so in the log.
		d.cfg.Logger.Warn("gpu: logs: copy interrupted", "job", id, "attempt", attempt, "stream", stream, "error", err.Error())
	}
	return nil
}
