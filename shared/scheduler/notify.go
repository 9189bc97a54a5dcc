package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-cron/baton/shared/notify"
	"github.com/baton-cron/baton/shared/schedule"
	"github.com/baton-cron/baton/shared/store"
)

// Defaults of the notification delivery (Config.Notify*).
const (
	// DefaultNotifyTimeout bounds one webhook request: short, so that the
	// delivery right after a run ends lands well within 10 s, and the
	// sweep's deliveries do not hold a tick for long.
	DefaultNotifyTimeout = 5 * time.Second
	// DefaultNotifyBackoff is the delay after the first failed delivery;
	// it doubles per attempt, up to MaxNotifyBackoff.
	DefaultNotifyBackoff = 30 * time.Second
	// MaxNotifyBackoff caps the delay between two deliveries.
	MaxNotifyBackoff = time.Hour
	// DefaultNotifyAttempts is how many deliveries an event gets before
	// it is given up (recorded on the run as notifyError): with the
	// default backoff, about two hours of a receiver being down.
	DefaultNotifyAttempts = 10
	// notifyPage bounds the events one sweep delivers, and notifyWorkers
	// how many at once: a tick's delivery time is bounded by
	// notifyPage/notifyWorkers × the timeout, not by the backlog.
	notifyPage    = 50
	notifyWorkers = 8
)

// HeaderUserAgent is the User-Agent of a webhook request.
const userAgent = "baton-notify/1"

// notice returns the notice that the outcome write of r should queue for
// event ev at now (milliseconds, as the database keeps it), or nil when no
// channel of s wants it. The notice is due a little after now: the process
// that records the outcome delivers it at once (deliverSoon), and the
// sweep only steps in when that delivery did not clear it in time, so the
// two rarely both send it.
func (e *Engine) notice(s *schedule.Schedule, ev schedule.Event, now time.Time) *store.Notice {
	if !e.channel(s).Wants(ev) {
		return nil
	}
	return &store.Notice{Event: ev, At: now.Add(2 * e.cfg.NotifyTimeout).UTC().Truncate(time.Millisecond)}
}

// channel is where the events of s go: its own notify block when it has
// one, else the deployment's default (BATON_NOTIFY_WEBHOOK_URL). A
// schedule's block replaces the default rather than adding to it, so a
// schedule can also turn the default off ({"on": []}). nil s (a schedule
// deleted since) gets the default.
func (e *Engine) channel(s *schedule.Schedule) *schedule.Notify {
	if s != nil && s.Notify != nil {
		return s.Notify
	}
	return e.cfg.Notify
}

// outcomeEvent is the event of a run that ended with status: failed, or
// recovered for a retry that succeeded (its attempt before failed, or
// there would be no retry). "" when there is none.
func outcomeEvent(r *schedule.Run, status schedule.RunStatus) schedule.Event {
	switch {
	case status == schedule.RunFailed:
		return schedule.EventFailed
	case status == schedule.RunSucceeded && r.Attempt > 1:
		return schedule.EventRecovered
	}
	return ""
}

// finished is r as the outcome o recorded it, with the notice o queued:
// what deliverSoon sends, without reading the run back.
func finished(r *runDoc, o store.RunOutcome) runDoc {
	f := *r
	f.Status, f.FinishedAt, f.Output, f.Error = o.Status, o.FinishedAt, o.Output, o.Error
	f.NotifyAt, f.NotifyEvent = time.Time{}, ""
	if o.Notice != nil {
		f.NotifyAt, f.NotifyEvent = o.Notice.At, o.Notice.Event
	}
	return f
}

// deliverSoon delivers the notice the outcome write just queued on r, in
// the background and within the notify timeout: never in the run's way.
// Whatever happens to it, the notice stays on the run until a delivery
// clears it, and the sweep delivers it then (deliverPending).
func (e *Engine) deliverSoon(ctx context.Context, s *schedule.Schedule, r runDoc) {
	if r.NotifyAt.IsZero() {
		return
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*e.cfg.NotifyTimeout)
		defer cancel()
		e.deliver(dctx, s, &r)
	}()
}

// deliverPending is the notification sweep: it delivers the events whose
// notice is due (their immediate delivery failed, or its process died, or
// the outcome's answer was lost), a page per tick, a few at a time. Reads
// grow with the pending events, not with the runs.
func (e *Engine) deliverPending(ctx context.Context, c *counters) {
	now := e.now().UTC()
	due, err := e.runs.PendingNotices(ctx, now, notifyPage)
	if err != nil {
		c.errors.Add(1)
		e.log.Error("notification sweep failed", "err", err)
		return
	}
	if len(due) == 0 {
		return
	}
	// One read per schedule, not per event.
	schedules := map[string]*schedule.Schedule{}
	for i := range due {
		id := due[i].ScheduleID
		if _, ok := schedules[id]; ok {
			continue
		}
		var s schedule.Schedule
		switch err := e.getSchedule(ctx, id, &s); {
		case err == nil:
			schedules[id] = &s
		case errors.Is(err, store.ErrNotFound):
			schedules[id] = nil // deleted: the default channel, if any
		default:
			e.log.Warn("read schedule for its notifications failed; the next sweep tries again", "schedule", id, "err", err)
		}
	}
	sem := make(chan struct{}, notifyWorkers)
	var wg sync.WaitGroup
	for i := range due {
		s, ok := schedules[due[i].ScheduleID]
		if !ok {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			e.deliver(ctx, s, &due[i])
		}()
	}
	wg.Wait()
}

// deliverPendingBackground runs the notification sweep in the background
// (Wait waits for it), one at a time per engine: a second would read the
// same pending events and send them twice. A tick never waits for it, so
// a slow receiver delays no tick and no run. (On Cloud Run functions, whose
// CPU is throttled once the answer is sent, it goes on at the instance's
// next request; the notices stay on their runs meanwhile, and the next
// tick's sweep delivers them if this one never does.)
func (e *Engine) deliverPendingBackground(ctx context.Context) {
	if !e.notifying.CompareAndSwap(false, true) {
		return
	}
	e.bg.Add(1)
	go func() {
		defer func() { e.notifying.Store(false); e.bg.Done() }()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		e.deliverPending(dctx, &counters{})
	}()
}

// deliver sends r's pending event to s's channel and settles the notice:
// cleared when it was delivered (or there is no channel for it any more),
// moved later with its error when not, given up after NotifyAttempts. Each
// settling write is conditional on the notifyAt read, so a deliverer that
// lost a race to another settles nothing: the event went out twice, which
// the receiver drops by its idempotency key.
func (e *Engine) deliver(ctx context.Context, s *schedule.Schedule, r *runDoc) {
	at := r.NotifyAt
	ch := e.channel(s)
	var err error
	if ch.Wants(r.NotifyEvent) {
		// Every channel of the schedule, each time: a retry after one
		// channel failed sends to the others again, which their
		// receivers drop by the idempotency key (at least once).
		var errs []error
		if ch.Webhook != nil {
			errs = append(errs, e.post(ctx, ch.Webhook, r))
		}
		if ch.PubSub != nil {
			errs = append(errs, e.publish(ctx, ch.PubSub.Topic, r))
		}
		err = errors.Join(errs...)
	} else {
		// The channel was removed or no longer wants the event: nobody
		// to tell.
		e.log.Info("notification dropped: the schedule no longer asks for it", "run", r.ID, "event", r.NotifyEvent)
	}
	switch {
	case err == nil:
		err = e.runs.NoticeDone(ctx, r.ID, at, "")
	case r.NotifyAttempts+1 >= e.cfg.NotifyAttempts:
		e.log.Error("notification given up", "run", r.ID, "event", r.NotifyEvent, "attempts", r.NotifyAttempts+1, "err", err)
		err = e.runs.NoticeDone(ctx, r.ID, at, truncate(err.Error(), 512))
	default:
		next := e.now().UTC().Add(notifyBackoff(e.cfg.NotifyBackoff, r.NotifyAttempts+1)).Truncate(time.Millisecond)
		e.log.Warn("notification failed; retried later", "run", r.ID, "event", r.NotifyEvent, "attempt", r.NotifyAttempts+1, "next", next, "err", err)
		err = e.runs.NoticeRetry(ctx, r.ID, at, next, truncate(err.Error(), 512))
	}
	if err != nil && !errors.Is(err, store.ErrConflict) {
		// The notice stays (or may): it is delivered again.
		e.log.Warn("settle notification failed; it is delivered again", "run", r.ID, "err", err)
	}
}

// notifyBackoff is the delay after failed delivery attempt n (from 1).
func notifyBackoff(base time.Duration, n int) time.Duration {
	for i := 1; i < n && base < MaxNotifyBackoff; i++ {
		base *= 2
	}
	return min(base, MaxNotifyBackoff)
}

// post sends r's event to the webhook w: a signed JSON POST through the
// same SSRF guard as http targets (the allowlist, checked again here, and
// the guarded dialer), following no redirect. Only a 2xx counts as
// delivered.
func (e *Engine) post(ctx context.Context, w *schedule.Webhook, r *runDoc) error {
	u, err := url.Parse(w.URL)
	if err != nil {
		return fmt.Errorf("notify webhook: url: %w", err)
	}
	if !schedule.IsAllowedHost(u, e.cfg.AllowedTargets) {
		return fmt.Errorf("notify webhook %s: %w", u.Host, ErrTargetNotAllowed)
	}
	body, err := json.Marshal(e.payload(r))
	if err != nil {
		return fmt.Errorf("notify webhook: encode: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.NotifyTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("notify webhook: request: %w", err)
	}
	ts := time.Now().Unix() // the receiver's tolerance is judged on real clocks
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(notify.HeaderEvent, string(r.NotifyEvent))
	req.Header.Set(notify.HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(notify.HeaderIdempotencyKey, notify.IdempotencyKey(r.ID, string(r.NotifyEvent)))
	req.Header.Set(notify.HeaderSignature, notify.Sign(w.Secret.Reveal(), ts, body))
	resp, err := e.notifyHTTP.Do(req)
	if err != nil {
		// Not the *url.Error itself, which quotes the whole URL: a
		// webhook URL often carries its own token in the path (Slack's
		// do), and this error is logged and kept on the run.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		return fmt.Errorf("notify webhook %s: %w", u.Host, err)
	}
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("notify webhook %s: answered %s", u.Host, resp.Status)
	}
	return nil
}

// publish sends r's event to a Pub/Sub topic: the payload's JSON as the
// data, the event and its idempotency key as attributes (Pub/Sub messages
// are authenticated by IAM, so they carry no signature).
func (e *Engine) publish(ctx context.Context, topic string, r *runDoc) error {
	if e.cfg.Publisher == nil {
		return fmt.Errorf("notify pubsub %s: no Pub/Sub publisher is configured in this process", topic)
	}
	body, err := json.Marshal(e.payload(r))
	if err != nil {
		return fmt.Errorf("notify pubsub: encode: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.NotifyTimeout)
	defer cancel()
	attrs := map[string]string{
		"event":          string(r.NotifyEvent),
		"idempotencyKey": notify.IdempotencyKey(r.ID, string(r.NotifyEvent)),
		"schedule":       r.ScheduleID,
		"run":            r.ID,
	}
	if _, err := e.cfg.Publisher.Publish(ctx, topic, notify.Message{Data: body, Attributes: attrs, Timeout: e.cfg.NotifyTimeout}); err != nil {
		return fmt.Errorf("notify pubsub %s: %w", topic, err)
	}
	return nil
}

// payload is the JSON body of r's pending event.
func (e *Engine) payload(r *runDoc) notify.Payload {
	p := notify.Payload{
		Event:    string(r.NotifyEvent),
		Schedule: r.ScheduleID,
		Run:      r.ID,
		FireTime: r.FireTime.UTC(),
		Status:   string(r.Status),
		Reason:   r.Reason,
		Source:   string(r.Source),
		Attempt:  r.Attempt,
	}
	if r.Status == schedule.RunFailed {
		p.Reason = r.Error
	}
	if base := strings.TrimRight(e.cfg.ConsoleURL, "/"); base != "" {
		p.ConsoleURL = base + "/runs/" + url.PathEscape(r.ID)
	}
	return p
}

// noRedirects makes a copy of the guarded client that follows no
// redirect: a webhook that moves must be reconfigured, not followed to a
// host nobody checked.
func noRedirects(c *http.Client) *http.Client {
	cp := *c
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}
