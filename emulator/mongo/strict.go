package mongo

import (
	"fmt"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Pages of Google's documentation that strict mode's rules follow. Each
// rule's refusal names its page, so a developer who meets one locally
// reads why production would refuse it too.
const (
	// urlConnect is in allowlist.go, beside the other pages the
	// allowlist cites.
	urlErrors    = "https://cloud.google.com/firestore/mongodb-compatibility/docs/understand-error-codes"
	urlBehaviour = "https://cloud.google.com/firestore/mongodb-compatibility/docs/behavior-differences"
)

// session is what the front remembers about one client connection.
type session struct {
	// loadBalanced is set by a hello that carried loadBalanced: true: the
	// driver is in load balanced mode, so every hello reply on this
	// connection carries serviceId.
	loadBalanced bool
	// unbilled is set by a handshake that names UnbilledApp: nothing
	// this connection sends is billed.
	unbilled bool
	// shuffled holds the cursors whose getMore batches are shuffled (an
	// unsorted find or aggregate). In load balanced mode the driver pins a
	// cursor to its connection, so its getMores come back here.
	shuffled map[int64]bool
}

// isHello reports whether the command is a handshake (hello, or the legacy
// isMaster in either spelling).
func (c command) isHello() bool {
	switch c.name {
	case "hello", "isMaster", "ismaster":
		return true
	}
	return false
}

// unbilledHello reports whether a handshake's client metadata names
// UnbilledApp as its application (the URI's appName).
func (c command) unbilledHello() bool {
	name, _ := c.body.Lookup("client", "application", "name").StringValueOK()
	return name == UnbilledApp
}

// loadBalancedHello reports whether a hello asks for load balanced mode,
// as the driver's does when the URI says loadBalanced=true.
func (c command) loadBalancedHello() bool {
	b, ok := c.body.Lookup("loadBalanced").BooleanOK()
	return ok && b
}

// handshakeRefusal refuses a handshake that is not in load balanced mode.
// Firestore requires it ("Drivers must connect in load balanced mode",
// https://cloud.google.com/firestore/mongodb-compatibility/docs/connect);
// a driver that monitors the topology instead never runs the pinned
// cursors and per-service pool clearing that production runs. A hello on a
// connection already in load balanced mode (an application's own
// RunCommand({hello: 1})) is answered.
func (c command) handshakeRefusal() *refusal {
	if !c.isHello() || c.loadBalanced {
		return nil
	}
	return &refusal{codeIllegalOperation, codeNameIllegalOperation, c.name +
		" without loadBalanced: Firestore with MongoDB compatibility requires drivers to connect in load balanced mode; " +
		"add loadBalanced=true to the connection string (" + urlConnect + "). " +
		"baton's emulator refuses other handshakes in strict mode (mongo.Options.Lax, baton local --lax-emulators, BATON_EMULATOR_LAX=1 turn that off)"}
}

// withServiceID returns the hello reply with serviceId added: the driver
// in load balanced mode refuses a handshake whose reply lacks it
// ("driver attempted to initialize in load balancing mode, but the server
// does not support this mode"), and scopes its pool generations by it.
func (f *front) withServiceID(req message, reply message) ([]byte, error) {
	body, _, err := parseOpMsg(reply.raw)
	if err != nil {
		return nil, fmt.Errorf("hello reply: %w", err)
	}
	d, err := toD(body)
	if err != nil {
		return nil, fmt.Errorf("hello reply: %w", err)
	}
	if ok, _ := body.Lookup("ok").AsFloat64OK(); ok == 1 {
		d = append(d, bson.E{Key: "serviceId", Value: f.serviceID})
	}
	return replyTo(req, d)
}

// toD copies a document's top-level elements into a bson.D, values kept raw.
func toD(doc bson.Raw) (bson.D, error) {
	elems, err := doc.Elements()
	if err != nil {
		return nil, err
	}
	d := make(bson.D, 0, len(elems)+1)
	for _, e := range elems {
		d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
	}
	return d, nil
}

// Stats counts what the front's strict rules did, for tests and the chaos
// test to report (Server.Stats).
type Stats struct {
	// Conflicts is the number of writes the front answered with 112
	// (WriteConflict, Firestore's Aborted) because another write to the
	// same document was in flight.
	Conflicts int64
	// ConflictsByDatabase is Conflicts by database name, so a test that
	// shares the emulator counts its own.
	ConflictsByDatabase map[string]int64
	// MaxWritesInFlight is the most writes that have held their locks at
	// once (from taking them to reading FerretDB's reply): above 1 proves
	// writes ran concurrently.
	MaxWritesInFlight int64
	// Refused is the number of commands the front refused itself (strict
	// rules and the always-on refusals; not the fail point's).
	Refused int64
	// Shuffled is the number of unsorted batches whose order it changed.
	Shuffled int64
	// Narrowed is the number of conditional writes forwarded with their
	// filter narrowed to their _id (pushdown.go).
	Narrowed int64
}

type stats struct {
	conflicts, inFlight, maxInFlight, refused, shuffled, narrowed atomic.Int64
	mu                                                            sync.Mutex
	byDB                                                          map[string]int64
}

// conflict counts one 112 answered to a write on database db.
func (s *stats) conflict(db string) {
	s.conflicts.Add(1)
	s.mu.Lock()
	if s.byDB == nil {
		s.byDB = map[string]int64{}
	}
	s.byDB[db]++
	s.mu.Unlock()
}

func (s *stats) enter() {
	n := s.inFlight.Add(1)
	for {
		m := s.maxInFlight.Load()
		if n <= m || s.maxInFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

func (s *stats) leave() { s.inFlight.Add(-1) }

func (s *stats) snapshot() Stats {
	s.mu.Lock()
	byDB := make(map[string]int64, len(s.byDB))
	for k, v := range s.byDB {
		byDB[k] = v
	}
	s.mu.Unlock()
	return Stats{
		ConflictsByDatabase: byDB,
		Conflicts:           s.conflicts.Load(),
		MaxWritesInFlight:   s.maxInFlight.Load(),
		Refused:             s.refused.Load(),
		Shuffled:            s.shuffled.Load(),
		Narrowed:            s.narrowed.Load(),
	}
}
