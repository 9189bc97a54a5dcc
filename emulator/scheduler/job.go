package scheduler

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Real Cloud Scheduler defaults (RetryConfig and Job.attemptDeadline).
const (
	DefaultMinBackoff      = 5 * time.Second
	DefaultMaxBackoff      = time.Hour
	DefaultMaxDoublings    = 5
	DefaultAttemptDeadline = 3 * time.Minute
	// MaxRetryCount is the largest retryCount the real API accepts.
	MaxRetryCount = 5
)

// ErrInvalidJob is wrapped by every validation error from AddJob.
var ErrInvalidJob = errors.New("scheduler: invalid job")

// ErrNoJob is returned for an unknown job name.
var ErrNoJob = errors.New("scheduler: no such job")

// Job is a Cloud Scheduler job with an HTTP target.
type Job struct {
	// Name is the short job id; the JobName header carries
	// projects/local/locations/local/jobs/<Name>.
	Name string
	// URL, Method (default POST), Body and Headers describe the request.
	URL     string
	Method  string
	Body    []byte
	Headers map[string]string
	// Exactly one of Every and Cron is set. Every is a fixed period; Cron is
	// unix-cron (5 fields, or a descriptor such as @hourly), read in
	// TimeZone.
	Every time.Duration
	Cron  string
	// TimeZone is an IANA name; empty means UTC.
	TimeZone string
	// Token, when set, is sent as Authorization: Bearer <Token>.
	Token string
	// Retry is the retry config; zero values take the real defaults.
	Retry RetryConfig
	// AttemptDeadline bounds one attempt; 0 means 3 minutes.
	AttemptDeadline time.Duration
}

// RetryConfig mirrors the real RetryConfig. Zero values mean the real
// defaults (retryCount 0, maxRetryDuration unlimited, minBackoff 5s,
// maxBackoff 1h, maxDoublings 5). Set NoDoublings to ask for 0 doublings.
type RetryConfig struct {
	RetryCount       int
	MaxRetryDuration time.Duration
	MinBackoff       time.Duration
	MaxBackoff       time.Duration
	MaxDoublings     int
	// NoDoublings makes MaxDoublings 0 (a zero MaxDoublings means the
	// default of 5, as an unset field does in the real API).
	NoDoublings bool
}

// FullName is the job's resource name as the JobName header carries it.
func (j Job) FullName() string { return "projects/local/locations/local/jobs/" + j.Name }

func (r RetryConfig) withDefaults() RetryConfig {
	if r.MinBackoff == 0 {
		r.MinBackoff = DefaultMinBackoff
	}
	if r.MaxBackoff == 0 {
		r.MaxBackoff = DefaultMaxBackoff
	}
	if r.MaxDoublings == 0 && !r.NoDoublings {
		r.MaxDoublings = DefaultMaxDoublings
	}
	return r
}

// Backoff is the wait before retry number n (0 for the first retry): it
// starts at MinBackoff, doubles MaxDoublings times, then grows linearly by
// MinBackoff×2^MaxDoublings, and never exceeds MaxBackoff.
func (r RetryConfig) Backoff(n int) time.Duration {
	r = r.withDefaults()
	if n < 0 {
		n = 0
	}
	d := r.MaxDoublings
	var wait time.Duration
	if n <= d {
		wait = r.MinBackoff << n
	} else {
		step := r.MinBackoff << d
		wait = step * time.Duration(n-d+1)
	}
	if wait <= 0 || wait > r.MaxBackoff { // ≤ 0: shifted past int64
		wait = r.MaxBackoff
	}
	return wait
}

// schedule is a parsed Every or Cron.
type schedule interface {
	Next(time.Time) time.Time
}

type every time.Duration

func (e every) Next(t time.Time) time.Time { return t.Add(time.Duration(e)) }

func (j *Job) validate() (schedule, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w %q: %s", ErrInvalidJob, j.Name, fmt.Sprintf(format, args...))
	}
	if j.Name == "" || strings.ContainsAny(j.Name, "/ ") {
		return nil, bad("name must be non-empty, without / or spaces")
	}
	if !strings.HasPrefix(j.URL, "http://") && !strings.HasPrefix(j.URL, "https://") {
		return nil, bad("url %q must be http(s)", j.URL)
	}
	if j.Method == "" {
		j.Method = http.MethodPost
	}
	if j.AttemptDeadline == 0 {
		j.AttemptDeadline = DefaultAttemptDeadline
	}
	if j.AttemptDeadline < 0 || j.AttemptDeadline > 30*time.Minute {
		return nil, bad("attemptDeadline %s must be in (0, 30m]", j.AttemptDeadline)
	}
	r := j.Retry
	if r.RetryCount < 0 || r.RetryCount > MaxRetryCount {
		return nil, bad("retryCount %d must be 0..%d", r.RetryCount, MaxRetryCount)
	}
	if r.MinBackoff < 0 || r.MaxBackoff < 0 || r.MaxDoublings < 0 || r.MaxRetryDuration < 0 {
		return nil, bad("retry durations and maxDoublings must not be negative")
	}
	if d := r.withDefaults(); d.MinBackoff > d.MaxBackoff {
		return nil, bad("minBackoff %s is above maxBackoff %s", d.MinBackoff, d.MaxBackoff)
	}
	loc := time.UTC
	if j.TimeZone != "" {
		l, err := time.LoadLocation(j.TimeZone)
		if err != nil {
			return nil, bad("time zone: %v", err)
		}
		loc = l
	}
	switch {
	case (j.Every > 0) == (j.Cron != ""):
		return nil, bad("set exactly one of Every (a positive period) and Cron")
	case j.Every > 0:
		return every(j.Every), nil
	}
	spec := j.Cron
	if !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		spec = "CRON_TZ=" + loc.String() + " " + spec
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, bad("cron %q: %v", j.Cron, err)
	}
	return s, nil
}
