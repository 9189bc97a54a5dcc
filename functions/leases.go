package functions

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/config"
	"github.com/baton-cron/baton/shared/errcode"
	"github.com/baton-cron/baton/shared/httpapi"
	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/schedule"
)

// Lease list page sizes: the default, and the largest (lease.MaxListPage,
// the same bound as every other list of the API).
const (
	DefaultLeasePageSize = 100
	MaxLeasePageSize     = lease.MaxListPage
)

// LeaseView is one lease in GET /leases: lease.Info as JSON, with Live
// judged when the page was read. TTL is a duration string ("30s"), as the
// rest of the API writes durations.
type LeaseView struct {
	Name       string            `json:"name"`
	Object     string            `json:"object"`
	Holder     string            `json:"holder"`
	Epoch      int64             `json:"epoch"`
	TTL        schedule.Duration `json:"ttl"`
	AcquiredAt time.Time         `json:"acquiredAt"`
	RenewedAt  time.Time         `json:"renewedAt"`
	Updated    time.Time         `json:"updated"`
	ExpiresAt  time.Time         `json:"expiresAt"`
	Generation int64             `json:"generation"`
	Free       bool              `json:"free"`
	Live       bool              `json:"live"`
}

// LeasePage is one page of GET /leases. NextPageToken continues the list;
// it is empty on the last page.
type LeasePage struct {
	Leases        []LeaseView `json:"leases"`
	NextPageToken string      `json:"nextPageToken"`
}

// withLeases serves GET /leases from the lease bucket and hands every
// other path to next (the catalog's routes), so the Schedules function is
// the one operator API for schedules, runs and leases. Without
// BATON_BUCKET the route answers 503 naming it; the others are unaffected.
func withLeases(d *Deps, next http.Handler) http.Handler {
	var m *lease.Manager
	if d.Storage != nil && d.Bucket != "" {
		// Listing only: the holder id is never written. The skew is the
		// deployment's, so expiresAt is the instant a contender may take
		// over, as Acquire judges it.
		o := lease.Options{Skew: d.ClockSkew, Logger: d.Logger}
		if d.Store != nil {
			// Where the scheduler's releases write their markers
			// (newEngine), so a released lease lists as free.
			o.Markers = d.Store.LeaseMarkers()
		}
		m = lease.NewManager(d.Storage.Bucket(d.Bucket), LeasePrefix, o)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Trim(r.URL.Path, "/") != "leases" {
			next.ServeHTTP(w, r)
			return
		}
		if err := listLeases(m, w, r); err != nil {
			httpapi.WriteError(w, r, err)
		}
	})
}

func listLeases(m *lease.Manager, w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		return httpapi.MethodNotAllowed(r.Method)
	}
	q := r.URL.Query()
	if err := httpapi.KnownParams(q, []string{"pageSize", "pageToken"}); err != nil {
		return err
	}
	n := DefaultLeasePageSize
	if s := q.Get("pageSize"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > MaxLeasePageSize {
			return httpapi.BadRequest("pageSize", "must be an integer between 1 and %d, not %q", MaxLeasePageSize, s)
		}
		n = v
	}
	// Checked before the bucket, like every other input: a bad request is
	// a 400 whatever the deployment.
	if m == nil {
		return errcode.New(errcode.Unavailable, config.EnvBucket+" is not set; GET /leases reads the lease objects in the bucket")
	}
	infos, next, err := m.ListPage(r.Context(), n, q.Get("pageToken"))
	if errors.Is(err, lease.ErrBadPageToken) {
		return httpapi.BadRequest("pageToken", "invalid page token: pass back the nextPageToken of the same list, unmodified")
	}
	if err != nil {
		return err
	}
	now := time.Now()
	page := LeasePage{Leases: make([]LeaseView, 0, len(infos)), NextPageToken: next}
	for _, i := range infos {
		page.Leases = append(page.Leases, LeaseView{
			Name: i.Name, Object: i.Object, Holder: i.Holder, Epoch: i.Epoch, TTL: schedule.Duration(i.TTL),
			AcquiredAt: i.AcquiredAt, RenewedAt: i.RenewedAt, Updated: i.Updated, ExpiresAt: i.ExpiresAt,
			Generation: i.Generation, Free: i.Free, Live: i.Live(now),
		})
	}
	httpapi.WriteJSON(w, http.StatusOK, page)
	return nil
}
