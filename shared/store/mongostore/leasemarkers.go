package mongostore

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// LeaseMarkersCollection holds the leases' release markers, one document
// per lease (LeaseMarkers).
const LeaseMarkersCollection = "lease_markers"

// LeaseMarkers keeps the scheduler's lease release markers in Firestore
// (lease.Options.Markers), one small document per lease, _id the marker's
// object name. In Cloud Storage a marker is a Class A write per release
// ($5 per million); here it is a write unit ($0.26 per million), and its
// read a read unit instead of a Class B operation (docs/cost.md). Reads
// are strongly consistent, as a marker must be. It needs no index: it is
// read by _id.
type LeaseMarkers struct{ c *Collection }

// LeaseMarkers returns the store's release-marker collection.
func (s *Store) LeaseMarkers() LeaseMarkers { return LeaseMarkers{c: s.named(LeaseMarkersCollection)} }

type leaseMarkerDoc struct {
	ID    string `bson:"_id"`
	Epoch int64  `bson:"epoch"`
	Token string `bson:"token"`
}

// WriteReleaseMarker replaces the key's marker. The write is an upsert of
// fixed values, so repeating it after a lost answer changes nothing: it
// is retried after a 112 and after a deadline alike.
func (m LeaseMarkers) WriteReleaseMarker(ctx context.Context, key string, epoch int64, token string) error {
	err := retryWrite(ctx, true, func() error {
		// An older acquisition's marker never replaces a newer one's: a
		// releaser that stalled past its TTL and writes late must not
		// overwrite the marker of the holder after it (that lease would
		// then read as held until its TTL). With a newer marker there, the
		// filter misses and the upsert's insert meets the _id: nothing to
		// write. The same epoch rewrites (a retry writes the same value).
		_, err := m.c.c.UpdateOne(ctx, bson.D{{Key: "_id", Value: key}, {Key: "epoch", Value: bson.D{{Key: "$lte", Value: epoch}}}},
			bson.D{{Key: "$set", Value: bson.D{{Key: "epoch", Value: epoch}, {Key: "token", Value: token}}}},
			options.UpdateOne().SetUpsert(true))
		if mongo.IsDuplicateKeyError(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return m.c.writeError("write release marker in", err)
	}
	m.c.meter.AddWrite(m.c.op("marker"), 1)
	return nil
}

// ReadReleaseMarker returns the key's marker; ok is false when there is
// none.
func (m LeaseMarkers) ReadReleaseMarker(ctx context.Context, key string) (epoch int64, token string, ok bool, err error) {
	var d leaseMarkerDoc
	err = m.c.c.FindOne(ctx, bson.D{{Key: "_id", Value: key}}).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return 0, "", false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("store: read release marker %s: %w", key, err)
	}
	m.c.meter.Add(m.c.op("marker"), 1)
	return d.Epoch, d.Token, true, nil
}
