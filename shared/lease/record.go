package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
)

// record is the lease object's body. Holder "" is the free state left by a
// release or a break; its Epoch is kept so the next holder's is higher.
type record struct {
	Holder     string    `json:"holder"`
	Epoch      int64     `json:"epoch"`
	TTLSeconds float64   `json:"ttlSeconds"`
	AcquiredAt time.Time `json:"acquiredAt"`
	RenewedAt  time.Time `json:"renewedAt"`
	Token      string    `json:"token,omitempty"`
}

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

func (m *Manager) object(name string) *storage.ObjectHandle { return m.handle(m.objectName(name)) }

// handle is object with the lease writes' retry policy: idempotent only
// (a write under a precondition).
func (m *Manager) handle(object string) *storage.ObjectHandle {
	return m.bucket.Object(object).Retryer(
		storage.WithPolicy(storage.RetryIdempotent),
		storage.WithBackoff(m.backoff),
	)
}

// read returns the lease's state, or ErrNotFound when the object is missing.
// It is one metadata GET; the body is read only for objects written by
// something other than this package (no metadata mirror).
func (m *Manager) read(ctx context.Context, name string) (state, error) {
	obj := m.object(name)
	attrs, err := obj.Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return state{}, ErrNotFound
	}
	if err != nil {
		return state{}, fmt.Errorf("lease %q: read: %w", name, err)
	}
	return m.stateFromAttrs(ctx, name, attrs)
}

func (m *Manager) stateFromAttrs(ctx context.Context, name string, attrs *storage.ObjectAttrs) (state, error) {
	rec, ok := recordFromMetadata(attrs.Metadata)
	if !ok {
		r, err := m.object(name).Generation(attrs.Generation).NewReader(ctx)
		if err != nil {
			return state{}, fmt.Errorf("lease %q: read body: %w", name, err)
		}
		defer r.Close()
		b, err := io.ReadAll(io.LimitReader(r, 1<<16))
		if err != nil {
			return state{}, fmt.Errorf("lease %q: read body: %w", name, err)
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			return state{}, fmt.Errorf("lease %q: object is not a lease: %w", name, err)
		}
	}
	return state{record: rec, Generation: attrs.Generation, Updated: attrs.Updated}, nil
}

// write stores rec under the precondition c and returns the new state, with
// the generation and Updated time from the server's response.
func (m *Manager) write(ctx context.Context, name string, rec record, c storage.Conditions) (state, error) {
	return m.writeTo(ctx, m.object(name), name, rec, c)
}

// writeTo is write to another object than name's own (a legacy object,
// spread.go).
func (m *Manager) writeTo(ctx context.Context, obj *storage.ObjectHandle, name string, rec record, c storage.Conditions) (state, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return state{}, fmt.Errorf("lease %q: encode: %w", name, err)
	}
	w := obj.If(c).NewWriter(ctx)
	w.ContentType = "application/json"
	w.CacheControl = "no-store"
	w.Metadata = rec.metadata()
	// The body is a few hundred bytes. The default 16 MiB chunk buffer would
	// be allocated and zeroed on every heartbeat; the minimum chunk size still
	// sends one request and keeps the library's retries (ChunkSize 0 would
	// disable them, and the lost-create recovery relies on them).
	w.ChunkSize = googleapi.MinUploadChunkSize
	if _, err := w.Write(body); err != nil {
		_ = w.Close()
		return state{}, fmt.Errorf("lease %q: write: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return state{}, fmt.Errorf("lease %q: write: %w", name, err)
	}
	a := w.Attrs()
	return state{record: rec, Generation: a.Generation, Updated: a.Updated}, nil
}

// isPreconditionFailed reports a 412 from GCS.
func isPreconditionFailed(err error) bool {
	var e *googleapi.Error
	return errors.As(err, &e) && e.Code == http.StatusPreconditionFailed
}
