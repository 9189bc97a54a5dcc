package mongostore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"

	"github.com/baton-cron/baton/emulator/emutest"
	"github.com/baton-cron/baton/shared/store/mongostore"
)

// sentCommand is one command a client started (command monitor) or wrote
// on a connection (wireTap): its name and $db.
type sentCommand struct{ name, db string }

// commandLog is the command monitor's record: every command the driver
// started, and which of them the server answered.
type commandLog struct {
	mu       sync.Mutex
	started  map[int64]sentCommand
	answered map[int64]bool
	order    []int64
}

func (l *commandLog) monitor() *event.CommandMonitor {
	l.started, l.answered = map[int64]sentCommand{}, map[int64]bool{}
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.started[e.RequestID] = sentCommand{e.CommandName, e.DatabaseName}
			l.order = append(l.order, e.RequestID)
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.answered[e.RequestID] = true
		},
		Failed: func(_ context.Context, e *event.CommandFailedEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			// A server's refusal is an answer; a context that ended
			// before the write is not.
			l.answered[e.RequestID] = !errors.Is(e.Failure, context.Canceled)
		},
	}
}

// wireTap dials real connections and records the OP_MSG commands written
// on them, as the server receives them: the handshake and monitoring too,
// which the command monitor does not show.
type wireTap struct {
	mu   sync.Mutex
	sent []sentCommand
}

func (w *wireTap) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &tappedConn{Conn: c, tap: w}, nil
}

type tappedConn struct {
	net.Conn
	tap *wireTap
	buf []byte
}

// Write records each whole wire message written: OP_MSG (2013) section 0
// is the command document.
func (c *tappedConn) Write(p []byte) (int, error) {
	c.buf = append(c.buf, p...)
	for len(c.buf) >= 16 {
		n := int(binary.LittleEndian.Uint32(c.buf))
		if n < 16 || len(c.buf) < n {
			break
		}
		msg := c.buf[:n]
		if binary.LittleEndian.Uint32(msg[12:]) == 2013 && n > 21 && msg[20] == 0 {
			doc := bson.Raw(msg[21:])
			if elems, err := doc.Elements(); err == nil && len(elems) > 0 {
				db, _ := doc.Lookup("$db").StringValueOK()
				c.tap.mu.Lock()
				c.tap.sent = append(c.tap.sent, sentCommand{elems[0].Key(), db})
				c.tap.mu.Unlock()
			}
		}
		c.buf = c.buf[n:]
	}
	return c.Conn.Write(p)
}

// TestNoCommandToAdmin: Firestore limits each connection to a single
// database ("Behavior differences"), so nothing the store sends may name
// another one, admin included: not Open's ping, not ordinary reads and
// writes, and not Close, whose driver Disconnect would end the pooled
// sessions with endSessions on admin. The connection handshake (hello) is
// the driver's own and every MongoDB-API server's, and is left out.
func TestNoCommandToAdmin(t *testing.T) {
	ctx := context.Background()
	var log commandLog
	var tap wireTap
	name := emutest.DBName(t)
	st, err := mongostore.OpenMonitored(ctx, emutest.MongoURI(t), mongostore.Options{Database: name}, log.monitor(), &tap)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emutest.RawClient(t, emutest.MongoURI(t)).Database(name).Drop(context.Background()) })
	c := st.Collection("jobs")
	if _, err := c.InsertIdempotent(ctx, job{ID: "a", N: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.UpdateOne(ctx, bson.D{{Key: "_id", Value: "a"}}, inc("n")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Count(ctx, bson.D{}); err != nil {
		t.Fatal(err)
	}
	var all []job
	if err := c.Find(ctx, bson.D{}, &all); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(ctx); err != nil {
		t.Fatal(err)
	}

	pinged := false
	for _, id := range log.order {
		cmd := log.started[id]
		pinged = pinged || cmd.name == "ping" && cmd.db == name
		if cmd.db != name && log.answered[id] {
			t.Errorf("%s went to database %q and was answered; want every command on the store's own %q", cmd.name, cmd.db, name)
		}
	}
	if !pinged {
		t.Errorf("Open sent no ping to %q (commands: %v)", name, log.started)
	}
	for _, cmd := range tap.sent {
		switch {
		case cmd.name == "hello" || cmd.name == "isMaster" || cmd.name == "ismaster":
		case cmd.db != name:
			t.Errorf("on the wire: %s to database %q; want every command on the store's own %q", cmd.name, cmd.db, name)
		}
	}
	if len(tap.sent) == 0 {
		t.Error("the tap recorded nothing on the wire")
	}
}
