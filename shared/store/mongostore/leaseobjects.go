package mongostore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/baton-cron/baton/shared/lease"
	"github.com/baton-cron/baton/shared/store"
)

// LeaseObjectsCollection holds the job leases when they are kept in
// Firestore (BATON_JOB_LEASE_STORE=firestore), one document per lease.
const LeaseObjectsCollection = "job_leases"

// LeaseObjects keeps lease objects as Firestore documents
// (lease.Options.JobLeases): _id the object's name, the record's fields,
// gen the compare-and-set token and updated the server's time of the last
// write. An acquire is one write unit ($0.26 per million in Firestore
// Enterprise) where a Cloud Storage object is a Class A write ($5.00 per
// million, https://cloud.google.com/storage/pricing#operations-pricing);
// docs/cost.md has the whole bill. It needs no index beyond _id: leases
// are read and written by _id, and listed in _id order.
//
// The compare-and-set is a findAndModify whose filter names _id and gen:
// it matches only the generation the caller saw, sets gen to one more,
// and answers the document as written, with the server's time in updated
// ($currentDate), so no read follows a write. Generation 0 creates: an
// upsert whose filter {_id, gen: 0} matches no stored lease (gen is at
// least 1), so a lease that exists makes the insert meet its _id, a
// duplicate key, which is the conflict.
//
// A WriteConflict (112) did not apply and is retried. Any other failure
// (a deadline, a dropped connection) is not: the write may have landed,
// and a retry would miss its own condition. lease.Manager then reads the
// document back and recognises its own write by the token, as it does for
// Cloud Storage.
type LeaseObjects struct{ c *Collection }

var _ lease.ObjectStore = LeaseObjects{}

// LeaseObjects returns the store's lease-object collection.
func (s *Store) LeaseObjects() LeaseObjects {
	return LeaseObjects{c: s.named(LeaseObjectsCollection)}
}

type leaseObjectDoc struct {
	ID         string    `bson:"_id"`
	Gen        int64     `bson:"gen"`
	Holder     string    `bson:"holder"`
	Epoch      int64     `bson:"epoch"`
	TTLSeconds float64   `bson:"ttlSeconds"`
	AcquiredAt time.Time `bson:"acquiredAt"`
	RenewedAt  time.Time `bson:"renewedAt"`
	Token      string    `bson:"token,omitempty"`
	Updated    time.Time `bson:"updated"`
}

func (d leaseObjectDoc) object() lease.Object {
	return lease.Object{Name: d.ID, Generation: d.Gen, Updated: d.Updated, Record: lease.Record{
		Holder: d.Holder, Epoch: d.Epoch, TTLSeconds: d.TTLSeconds,
		AcquiredAt: d.AcquiredAt, RenewedAt: d.RenewedAt, Token: d.Token,
	}}
}

// ReadObject reads the lease document by _id.
func (o LeaseObjects) ReadObject(ctx context.Context, object string) (lease.Object, error) {
	var d leaseObjectDoc
	err := o.c.Get(ctx, object, &d)
	if errors.Is(err, store.ErrNotFound) {
		return lease.Object{}, fmt.Errorf("store: read lease %s: %w", object, lease.ErrNotFound)
	}
	if err != nil {
		return lease.Object{}, fmt.Errorf("store: read lease %s: %w", object, err)
	}
	return d.object(), nil
}

// WriteObject writes rec when the document's gen is gen (0: when there is
// no document), and answers the document as written.
func (o LeaseObjects) WriteObject(ctx context.Context, object string, rec lease.Record, gen int64) (lease.Object, error) {
	set := bson.D{
		{Key: "gen", Value: gen + 1},
		{Key: "holder", Value: rec.Holder},
		{Key: "epoch", Value: rec.Epoch},
		{Key: "ttlSeconds", Value: rec.TTLSeconds},
		{Key: "acquiredAt", Value: rec.AcquiredAt.UTC()},
		{Key: "renewedAt", Value: rec.RenewedAt.UTC()},
		{Key: "token", Value: rec.Token},
	}
	// The store's clock, not the holder's: expiry is judged on it.
	update := bson.D{{Key: "$set", Value: set}, {Key: "$currentDate", Value: bson.D{{Key: "updated", Value: true}}}}
	filter := bson.D{{Key: "_id", Value: object}, {Key: "gen", Value: gen}}
	var opts []options.Lister[options.FindOneAndUpdateOptions]
	if gen == 0 {
		opts = append(opts, options.FindOneAndUpdate().SetUpsert(true))
	}
	var d leaseObjectDoc
	err := o.c.FindOneAndUpdate(ctx, filter, update, &d, opts...)
	if mongo.IsDuplicateKeyError(err) {
		// A create that met a stored lease: the generation did not match.
		return lease.Object{}, fmt.Errorf("store: create lease %s: %w: %w", object, store.ErrConflict, err)
	}
	if err != nil {
		return lease.Object{}, fmt.Errorf("store: write lease %s at generation %d: %w", object, gen, err)
	}
	return d.object(), nil
}

// DeleteObject deletes the document when its gen is gen.
func (o LeaseObjects) DeleteObject(ctx context.Context, object string, gen int64) error {
	if err := o.c.DeleteOne(ctx, bson.D{{Key: "_id", Value: object}, {Key: "gen", Value: gen}}); err != nil {
		return fmt.Errorf("store: delete lease %s at generation %d: %w", object, gen, err)
	}
	return nil
}

// ListObjects pages the documents whose _id starts with prefix in _id
// order. The page token is the last _id of the page, with the prefix it
// was issued for: the next page starts after it, reading only its own
// documents.
func (o LeaseObjects) ListObjects(ctx context.Context, prefix string, pageSize int, pageToken string) ([]lease.Object, string, error) {
	if pageSize < 1 || pageSize > lease.MaxListPage {
		return nil, "", fmt.Errorf("store: list leases: page size %d is not between 1 and %d", pageSize, lease.MaxListPage)
	}
	after := ""
	if pageToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(pageToken)
		p, last, ok := strings.Cut(string(b), "\x00")
		if err != nil || !ok || p != prefix || !strings.HasPrefix(last, prefix) {
			return nil, "", fmt.Errorf("store: list leases: %w", lease.ErrBadPageToken)
		}
		after = last
	}
	// _id range [prefix, prefix+U+FFFF): every name that starts with prefix.
	rng := bson.D{{Key: "$gte", Value: prefix}, {Key: "$lt", Value: prefix + "\uffff"}}
	if after != "" {
		rng[0] = bson.E{Key: "$gt", Value: after}
	}
	var docs []leaseObjectDoc
	err := o.c.Find(ctx, bson.D{{Key: "_id", Value: rng}}, &docs,
		options.Find().SetSort(bson.D{{Key: "_id", Value: 1}}).SetLimit(int64(pageSize)+1))
	if err != nil {
		return nil, "", fmt.Errorf("store: list leases %q: %w", prefix, err)
	}
	next := ""
	if len(docs) > pageSize {
		docs = docs[:pageSize]
		next = base64.RawURLEncoding.EncodeToString([]byte(prefix + "\x00" + docs[len(docs)-1].ID))
	}
	out := make([]lease.Object, len(docs))
	for i, d := range docs {
		out[i] = d.object()
	}
	return out, next, nil
}
