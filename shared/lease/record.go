package lease

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"

	"github.com/baton-cron/baton/shared/store"
)

// Record is a lease object's content. Holder "" is the free state left by
// a release or a break; its Epoch is kept so the next holder's is higher.
// Token is random per acquisition: a holder recognises its own write by
// it when the write's answer was lost.
type Record struct {
	Holder     string    `json:"holder"`
	Epoch      int64     `json:"epoch"`
	TTLSeconds float64   `json:"ttlSeconds"`
	AcquiredAt time.Time `json:"acquiredAt"`
	RenewedAt  time.Time `json:"renewedAt"`
	Token      string    `json:"token,omitempty"`
}

// record is Record under the name the package's code has always used.
type record = Record

func (r record) ttl() time.Duration {
	return time.Duration(r.TTLSeconds * float64(time.Second))
}

// Metadata keys mirroring the body, so one metadata read tells everything.
const (
	mdHolder   = "baton-holder"
	mdEpoch    = "baton-epoch"
	mdTTL      = "baton-ttl-seconds"
	mdAcquired = "baton-acquired-at"
	mdRenewed  = "baton-renewed-at"
	mdToken    = "baton-token"
)

func (r record) metadata() map[string]string {
	return map[string]string{
		mdHolder:   r.Holder,
		mdEpoch:    strconv.FormatInt(r.Epoch, 10),
		mdTTL:      strconv.FormatFloat(r.TTLSeconds, 'f', -1, 64),
		mdAcquired: r.AcquiredAt.UTC().Format(time.RFC3339Nano),
		mdRenewed:  r.RenewedAt.UTC().Format(time.RFC3339Nano),
		mdToken:    r.Token,
	}
}

func recordFromMetadata(md map[string]string) (record, bool) {
	epochStr, ok := md[mdEpoch]
	if !ok {
		return record{}, false
	}
	var r record
	var err error
	if r.Epoch, err = strconv.ParseInt(epochStr, 10, 64); err != nil {
		return record{}, false
	}
	if r.TTLSeconds, err = strconv.ParseFloat(md[mdTTL], 64); err != nil {
		return record{}, false
	}
	r.Holder, r.Token = md[mdHolder], md[mdToken]
	r.AcquiredAt, _ = time.Parse(time.RFC3339Nano, md[mdAcquired])
	r.RenewedAt, _ = time.Parse(time.RFC3339Nano, md[mdRenewed])
	return r, true
}

// state is a record with the object's server-side attributes.
type state struct {
	record
	Generation int64
	Updated    time.Time
	// Released: the holder has released the lease with a release marker
	// (marker.go) that names this epoch and token, so the lease is free
	// although the object still names the holder.
	Released bool
}

// expiresAt is when a contender may take over: server Updated + ttl + skew.
func (s state) expiresAt(skew time.Duration) time.Time {
	return s.Updated.Add(s.ttl() + skew)
}

func (s state) free() bool { return s.Holder == "" || s.Released }

// objectName maps a lease name to its object: PREFIX+NAME+".json", or
// PREFIX+hh/+NAME+".json" for a spread lease (spread.go).
func (m *Manager) objectName(name string) string {
	if m.spreads(name) {
		return m.prefix + SpreadDir(name) + name + ".json"
	}
	return m.prefix + name + ".json"
}

// read returns the lease's state, or ErrNotFound when the object is missing.
// For the bucket it is one metadata GET (gcsObjects.ReadObject).
func (m *Manager) read(ctx context.Context, name string) (state, error) {
	o, err := m.objectsFor(name).ReadObject(ctx, m.objectName(name))
	if err != nil {
		return state{}, fmt.Errorf("lease %q: read: %w", name, err)
	}
	return state{record: o.Record, Generation: o.Generation, Updated: o.Updated}, nil
}

// write stores rec under the precondition c and returns the new state, with
// the generation and Updated time from the store's answer. c is
// DoesNotExist (generation 0) or GenerationMatch.
func (m *Manager) write(ctx context.Context, name string, rec record, c storage.Conditions) (state, error) {
	o, err := m.objectsFor(name).WriteObject(ctx, m.objectName(name), rec, c.GenerationMatch)
	if err != nil {
		return state{}, fmt.Errorf("lease %q: write: %w", name, err)
	}
	return state{record: o.Record, Generation: o.Generation, Updated: o.Updated}, nil
}

// writeTo is write to another bucket object than name's own (a legacy
// object, spread.go).
func (m *Manager) writeTo(ctx context.Context, object string, name string, rec record, c storage.Conditions) (state, error) {
	o, err := m.gcs.WriteObject(ctx, object, rec, c.GenerationMatch)
	if err != nil {
		return state{}, fmt.Errorf("lease %q: write: %w", name, err)
	}
	return state{record: o.Record, Generation: o.Generation, Updated: o.Updated}, nil
}

// stateFromAttrs is the state of a listed bucket object.
func (m *Manager) stateFromAttrs(ctx context.Context, name string, attrs *storage.ObjectAttrs) (state, error) {
	o, err := m.gcs.objectFromAttrs(ctx, attrs)
	if err != nil {
		return state{}, fmt.Errorf("lease %q: %w", name, err)
	}
	return state{record: o.Record, Generation: o.Generation, Updated: o.Updated}, nil
}

// isPreconditionFailed reports a generation that did not match: a 412
// from GCS, store.ErrConflict from another ObjectStore.
func isPreconditionFailed(err error) bool {
	var e *googleapi.Error
	return errors.As(err, &e) && e.Code == http.StatusPreconditionFailed || errors.Is(err, store.ErrConflict)
}
