package emutest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/baton-cron/baton/emulator/mongo"
	"github.com/baton-cron/baton/shared/store"
)

var (
	mongoOnce sync.Once
	mongoSrv  *mongo.Server
	mongoErr  error
)

// MongoURI returns the URI of the package-wide Mongo emulator, starting it
// on first use. It lives until the test binary exits; its data is in a
// temporary directory.
func MongoURI(t testing.TB) string {
	t.Helper()
	mongoOnce.Do(func() {
		mongoSrv, mongoErr = mongo.Start(context.Background(), mongo.Options{})
	})
	if mongoErr != nil {
		t.Fatalf("emutest: start mongo emulator: %v", mongoErr)
	}
	return mongoSrv.URI()
}

// DBName returns a database name unique to this test.
func DBName(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, t.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.ToLower(name) + "_" + hex.EncodeToString(b[:])
}

// Store opens a store on a fresh database of the shared emulator and closes
// it when the test ends.
func Store(t testing.TB) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), MongoURI(t), store.Options{Database: DBName(t)})
	if err != nil {
		t.Fatalf("emutest: open store: %v", err)
	}
	t.Cleanup(func() {
		_ = s.Database().Drop(context.Background())
		_ = s.Close(context.Background())
	})
	return s
}
