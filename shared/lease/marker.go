package lease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
)

// Release markers.
//
// Cloud Storage allows about one write per second to one object name
// (https://cloud.google.com/storage/quotas, Objects: "There is an update
// limit on each object of once per second"; faster writes get 429). A
// lease that is acquired and released once per run would write its object
// twice per run, and a schedule that fires every second would be refused.
// So a release does not write the lease object: it writes a second object,
// NAME+".json.released", naming the epoch and the token of the acquisition
// it ends. An acquirer that finds the lease object held reads the marker;
// when the marker names the lease's current epoch and token, the lease is
// free, and the acquirer overwrites the lease object with GenerationMatch
// and epoch+1, exactly as it would a free state. A run then costs one write
// to each object, and neither is written more than once per run.
//
// Safety does not rest on the marker's own writes: only the holder knows
// its token (random per acquisition), and it writes the marker after its
// heartbeat has stopped, so a marker that matches the lease object can
// only mean that the holder named in it has let go. A marker that does not
// match (an older release, or a zombie's) is ignored. The marker is
// written without a precondition, so the library retries it (RetryAlways):
// rewriting the same epoch and token changes nothing. Exclusion, the
// monotonic epoch, the trust window and the lost-create recovery are the
// lease object's, unchanged.

// markerSuffix follows the lease object's name; List skips such objects
// (they do not end in ".json").
const markerSuffix = ".released"

func (m *Manager) markerName(name string) string { return m.objectName(name) + markerSuffix }

func (m *Manager) markerObject(name string) *storage.ObjectHandle {
	return m.bucket.Object(m.markerName(name)).Retryer(
		storage.WithPolicy(storage.RetryAlways),
		storage.WithBackoff(m.backoff),
	)
}

// marker is what a release marker says: the acquisition it released.
type marker struct {
	Epoch int64  `json:"epoch"`
	Token string `json:"token"`
}

// matches reports whether the marker releases the lease as st has it.
func (k marker) matches(st state) bool {
	return st.Token != "" && k.Token == st.Token && k.Epoch == st.Epoch
}

// writeMarker records that the acquisition rec (its epoch and token) is
// released.
func (m *Manager) writeMarker(ctx context.Context, name string, rec record) error {
	k := marker{Epoch: rec.Epoch, Token: rec.Token}
	if m.markers != nil {
		if err := m.space(ctx, m.markerName(name)); err != nil {
			return fmt.Errorf("lease %q: release marker: %w", name, err)
		}
		if err := m.markers.WriteReleaseMarker(ctx, m.markerName(name), k.Epoch, k.Token); err != nil {
			return fmt.Errorf("lease %q: write release marker: %w", name, err)
		}
		return nil
	}
	body, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("lease %q: encode release marker: %w", name, err)
	}
	if err := m.space(ctx, m.markerName(name)); err != nil {
		return fmt.Errorf("lease %q: release marker: %w", name, err)
	}
	w := m.markerObject(name).NewWriter(ctx)
	w.ContentType = "application/json"
	w.CacheControl = "no-store"
	w.Metadata = map[string]string{mdEpoch: strconv.FormatInt(k.Epoch, 10), mdToken: k.Token}
	w.ChunkSize = googleapi.MinUploadChunkSize // one request, retried (see write)
	if _, err := w.Write(body); err != nil {
		_ = w.Close()
		return fmt.Errorf("lease %q: write release marker: %w", name, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("lease %q: write release marker: %w", name, err)
	}
	return nil
}

// markerFromMetadata reads a marker from its object's metadata.
func markerFromMetadata(md map[string]string) (marker, bool) {
	e, err := strconv.ParseInt(md[mdEpoch], 10, 64)
	if err != nil || md[mdToken] == "" {
		return marker{}, false
	}
	return marker{Epoch: e, Token: md[mdToken]}, true
}

// readMarker returns the lease's release marker; ok is false when there is
// none.
func (m *Manager) readMarker(ctx context.Context, name string) (k marker, ok bool, err error) {
	return m.readMarkerObject(ctx, name, m.markerName(name))
}

// readMarkerObject is readMarker of the marker object named object (a
// legacy object's, spread.go).
func (m *Manager) readMarkerObject(ctx context.Context, name, object string) (k marker, ok bool, err error) {
	attrs, err := m.bucket.Object(object).Retryer(storage.WithPolicy(storage.RetryAlways), storage.WithBackoff(m.backoff)).Attrs(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return marker{}, false, nil
	}
	if err != nil {
		return marker{}, false, fmt.Errorf("lease %q: read release marker: %w", name, err)
	}
	k, ok = markerFromMetadata(attrs.Metadata)
	return k, ok, nil
}

// readLease is read plus the release marker: a lease whose object names a
// holder is checked against its marker, and comes back Released when the
// marker names its epoch and token. One more metadata read, only on the
// held path.
func (m *Manager) readLease(ctx context.Context, name string) (state, error) {
	st, err := m.read(ctx, name)
	if err != nil {
		return st, err
	}
	return m.released(ctx, name, st)
}

// storeReleased reports whether the marker store holds a marker that
// releases st.
func (m *Manager) storeReleased(ctx context.Context, name string, st state) (bool, error) {
	e, tok, ok, err := m.markers.ReadReleaseMarker(ctx, m.markerName(name))
	if err != nil {
		return false, fmt.Errorf("lease %q: read release marker: %w", name, err)
	}
	return ok && marker{Epoch: e, Token: tok}.matches(st), nil
}

// MinObjectWriteGap is the least time between two writes this manager
// sends to one object: Cloud Storage allows about one write per second to
// one object name (https://cloud.google.com/storage/quotas).
const MinObjectWriteGap = time.Second

// space waits until the manager's write gap (MinObjectWriteGap unless
// Options.ObjectWriteGap says otherwise) has passed since this manager's last
// write to the object, then notes this one. It spaces this manager's
// writes only; another process's writes to the object are spaced by the
// server's 429 and the library's backoff. It books no slot ahead: callers
// racing one another for the object (goroutines acquiring one lease) wait
// for the same moment and race then, as they would without it, rather than
// queueing a second apart behind each other.
func (m *Manager) space(ctx context.Context, object string) error {
	if m.writeGap < 0 {
		return nil
	}
	m.mu.Lock()
	last, ok := m.lastWrite[object]
	m.mu.Unlock()
	if ok {
		if wait := time.Until(last.Add(m.writeGap)); wait > 0 {
			t := time.NewTimer(wait)
			defer t.Stop()
			select {
			case <-ctx.Done():
				return fmt.Errorf("wait for the object's write rate: %w", ctx.Err())
			case <-t.C:
			}
		}
	}
	now := time.Now()
	m.mu.Lock()
	if cur, ok := m.lastWrite[object]; !ok || now.After(cur) {
		m.lastWrite[object] = now
	}
	if len(m.lastWrite) > 4096 {
		for k, t := range m.lastWrite {
			if now.Sub(t) > m.writeGap {
				delete(m.lastWrite, k)
			}
		}
	}
	m.mu.Unlock()
	return nil
}
