package mongo

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Wire protocol constants (MongoDB wire protocol, "Legacy opcodes" and
// "OP_MSG" in the server docs).
const (
	opReply      = 1
	opQuery      = 2004
	opCompressed = 2012
	opMsg        = 2013

	headerLen = 16
	// maxMessage bounds what the front buffers; MongoDB's own limit is
	// 48 MB (maxMessageSizeBytes), so anything above it is garbage.
	maxMessage = 48 * 1024 * 1024

	flagChecksumPresent = 1 << 0
	flagMoreToCome      = 1 << 1
)

// MongoDB error codes used in refusals. IllegalOperation is what a
// standalone mongod answers to a txnNumber; 40573 is what it answers to
// $changeStream, so client code written against MongoDB recognises both.
const (
	codeIllegalOperation     = 20
	codeChangeStreamNotHere  = 40573
	codeNameIllegalOperation = "IllegalOperation"
	codeNameChangeStream     = "Location40573"
)

// writeCommands take the front's write locks (contention.go). FerretDB v1
// runs a conditional update as "query, then write by _id" without
// re-checking the filter, so two racing compare-and-sets can both win
// unless no other write to that document runs in between.
var writeCommands = map[string]bool{
	"insert":        true,
	"update":        true,
	"delete":        true,
	"findAndModify": true,
	"findandmodify": true, // mongod accepts both spellings
}

// front is the wire-protocol proxy in front of FerretDB.
type front struct {
	ln      net.Listener
	backend string
	logger  *slog.Logger
	// strict turns on the Firestore rules of strict.go; off (Options.Lax),
	// the front only serialises writes and refuses what it always refuses.
	strict bool
	// serviceID is the serviceId every load-balanced hello reply carries:
	// one per emulator, as one Firestore endpoint is one service.
	serviceID bson.ObjectID

	// writeMu serialises every write in lax mode (there is one FerretDB
	// behind the front), which is the old behaviour: no 112, ever.
	writeMu sync.Mutex
	// locks are strict mode's per-collection and per-document write locks.
	locks docLocks
	// commitMu hands admitted writes to FerretDB one at a time in strict
	// mode. The locks decide what Firestore would: writes to different
	// documents are admitted together (no 112 between them), overlapping
	// writes to one document are not. SQLite, behind FerretDB, has a
	// single writer, and concurrent writers meet its busy handler, which
	// sleeps 1 to 100 ms between tries: letting them reach it together
	// made the GPU suite's 200-job run about twice as slow. An admitted
	// write waiting here is in flight, so it still conflicts with the
	// next write to its document.
	commitMu sync.Mutex
	// stats counts what strict mode did (Server.Stats).
	stats stats
	// bill prices what passes in Firestore's billing units
	// (Server.Billing, billing.go).
	bill biller
	// hook, when set (tests only), runs just before a write is forwarded,
	// with its locks held.
	hook func(command)
	// fail is the failCommand fail point (failpoint.go).
	fail failPoint
	// ids indexes FerretDB's _id lookups (idindex.go).
	ids *idIndexer

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startFront puts the wire-protocol front ahead of FerretDB (listening on
// addr) and returns it; f.uri() is what clients dial, f.close stops it.
func startFront(addr, backendURI string, logger *slog.Logger, strict bool) (*front, error) {
	u, err := url.Parse(backendURI)
	if err != nil {
		return nil, fmt.Errorf("mongo emulator: front: backend URI: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("mongo emulator: front: listen %s: %w", addr, err)
	}
	f := &front{ln: ln, backend: u.Host, logger: logger, strict: strict, serviceID: bson.NewObjectID(), conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

// uri is the client-facing connection string. It carries loadBalanced=true
// because Firestore requires it ("Drivers must connect in load balanced
// mode", https://cloud.google.com/firestore/mongodb-compatibility/docs/connect),
// so every local client connects the way production's do.
func (f *front) uri() string {
	return "mongodb://" + f.ln.Addr().String() + "/?loadBalanced=true"
}

func (f *front) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				f.logger.Error("mongo front: accept", "err", err)
			}
			return
		}
		if !f.track(c) {
			_ = c.Close()
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer f.untrack(c)
			f.serve(c)
		}()
	}
}

// track registers a connection so close can cut it; false once closed.
func (f *front) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *front) untrack(c net.Conn) {
	f.mu.Lock()
	delete(f.conns, c)
	f.mu.Unlock()
	_ = c.Close()
}

// close stops the listener, cuts every connection, and waits for the
// connection goroutines to finish.
func (f *front) close() error {
	f.mu.Lock()
	f.closed = true
	err := f.ln.Close()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// serve proxies one client connection over its own backend connection.
// The driver sends one request at a time per connection (a pipelined client
// works too: requests wait in the socket), so a plain loop keeps requests
// and replies paired.
func (f *front) serve(client net.Conn) {
	backend, err := net.Dial("tcp", f.backend)
	if err != nil {
		f.logger.Error("mongo front: dial backend", "err", err)
		return
	}
	if !f.track(backend) {
		_ = backend.Close()
		return
	}
	defer f.untrack(backend)

	cr := bufio.NewReader(client)
	br := bufio.NewReader(backend)
	sess := &session{}
	for {
		req, err := readMessage(cr)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				f.logger.Debug("mongo front: read request", "err", err)
			}
			return
		}
		if err := f.handle(sess, req, client, backend, br); err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				f.logger.Debug("mongo front: connection dropped", "err", err)
			}
			return
		}
	}
}

// handle answers one request: refuse it, or forward it (under the write
// locks for write commands) and relay its replies, rewritten where strict
// mode says so.
func (f *front) handle(sess *session, req message, client, backend net.Conn, br *bufio.Reader) error {
	cmd, err := inspect(req)
	if err != nil {
		// A message we cannot parse is not one a driver sends; cut the
		// connection rather than forward something we cannot police.
		return fmt.Errorf("inspect request: %w", err)
	}
	if cmd.name == "configureFailPoint" {
		return f.answer(req, cmd, client, f.fail.configure(cmd.body))
	}
	cmd.strict = f.strict
	if cmd.isHello() && cmd.loadBalancedHello() {
		sess.loadBalanced = true
	}
	if cmd.isHello() && cmd.unbilledHello() {
		sess.unbilled = true
	}
	cmd.loadBalanced = sess.loadBalanced
	r := cmd.refusal()
	if r != nil {
		f.stats.refused.Add(1)
		f.logger.Info("mongo front: refused", "command", cmd.name, "reason", r.codeName, "code", r.code)
		return f.answer(req, cmd, client, r.doc())
	}

	// The fail point comes first, as mongod checks failCommand when a
	// command arrives: a command it refuses or cuts takes no lock, and a
	// test that counts the fail point's answers (times: n) counts attempts,
	// whatever contention answers the attempts that pass it.
	act := f.fail.check(cmd)
	if act.close {
		return errCloseConnection // serve cuts the connection
	}
	if act.refuse != nil {
		f.logger.Info("mongo front: refused", "command", cmd.name, "reason", act.refuse.codeName, "code", act.refuse.code)
		return f.answer(req, cmd, client, act.refuse.doc())
	}
	if cmd.name == "explain" {
		return f.explain(req, cmd, client, backend, br) // explain.go
	}

	db, _ := cmd.body.Lookup("$db").StringValueOK()
	coll, _ := cmd.body.Index(0).Value().StringValueOK()
	switch cmd.name {
	case "drop":
		f.ids.forget(db, coll)
	case "dropDatabase":
		f.ids.forget(db, "")
	}

	unlock := func() {}
	committing := false
	if cmd.write {
		release, conflict := f.lockWrite(cmd)
		if conflict != nil {
			f.stats.conflict(db)
			f.logger.Info("mongo front: write conflict (Firestore contention rule)", "command", cmd.name, "namespace", cmd.namespace(), "code", conflict.code)
			return f.answer(req, cmd, client, conflict.doc())
		}
		// In flight from here until the locks are released, which
		// happens as soon as the reply has been read.
		f.stats.enter()
		unlock = sync.OnceFunc(func() {
			if committing {
				f.commitMu.Unlock()
			}
			f.stats.leave()
			release()
		})
	}
	defer unlock()

	out := req.raw
	if cmd.moreToCome {
		// FerretDB v1 ignores moreToCome and answers anyway, and a server
		// that honours it would leave us unable to tell when the write has
		// finished. Ask for the reply, then swallow it.
		out = withoutMoreToCome(req.raw)
	}
	order := f.orderFor(sess, cmd)
	if order.limit > 0 {
		if out, err = order.widen(req, cmd); err != nil {
			return err
		}
	}
	if cmd.write {
		// Under the write's locks: see narrow (pushdown.go).
		narrowed, ok, err := f.narrow(cmd, out, backend, br)
		if err != nil {
			return err
		}
		if ok {
			out = narrowed
			f.stats.narrowed.Add(1) // counted as forwarded
		}
	}
	if cmd.write && f.hook != nil {
		f.hook(cmd)
	}
	if cmd.write && f.strict {
		// Admitted, FerretDB commits it after the writes ahead of it:
		// see commitMu.
		f.commitMu.Lock()
		committing = true
	}
	if _, err := backend.Write(out); err != nil {
		return fmt.Errorf("forward request: %w", err)
	}
	for {
		reply, err := readMessage(br)
		if err != nil {
			return fmt.Errorf("read reply: %w", err)
		}
		if reply.opCode != opMsg || reply.flags()&flagMoreToCome == 0 {
			unlock() // the write is done; do not wait on a slow client
		}
		raw := reply.raw
		switch {
		case act.afterRun != nil && reply.opCode == opMsg:
			if raw, err = replyTo(req, act.afterRun.doc()); err != nil {
				return err
			}
		case act.wce != nil && reply.opCode == opMsg:
			if raw, err = withWriteConcernError(req, reply, act.wce); err != nil {
				return err
			}
		case sess.loadBalanced && cmd.isHello() && reply.opCode == opMsg:
			if raw, err = f.withServiceID(req, reply); err != nil {
				return err
			}
		case order.shuffle && reply.opCode == opMsg:
			if raw, err = f.reorder(sess, req, reply, order); err != nil {
				return err
			}
		}
		if reply.opCode == opMsg && !sess.unbilled {
			// A write is billed as it landed, whatever the fail point
			// answered; a read as what was relayed.
			src := raw
			if cmd.write {
				src = reply.raw
			}
			if body, _, err := parseOpMsg(src); err == nil {
				f.bill.observe(cmd, body)
			}
		}
		if (cmd.write || cmd.name == "create" || cmd.name == "createIndexes") && (reply.opCode != opMsg || reply.flags()&flagMoreToCome == 0) {
			// The collection exists now; indexed before the client hears
			// back, so its next lookup uses the index: see idIndexer.
			if _, err := f.ids.ensure(db, coll); err != nil {
				f.logger.Warn("mongo front: _id lookup index", "namespace", cmd.namespace(), "err", err)
			}
		}
		if !cmd.moreToCome {
			if _, err := client.Write(raw); err != nil {
				return fmt.Errorf("relay reply: %w", err)
			}
		}
		// An exhaust reply (moreToCome set) is followed by more replies to
		// the same request, without another request.
		if reply.opCode != opMsg || reply.flags()&flagMoreToCome == 0 {
			return nil
		}
	}
}

// message is one wire message, header included.
type message struct {
	raw       []byte
	requestID int32
	opCode    int32
}

func (m message) flags() uint32 {
	if m.opCode != opMsg || len(m.raw) < headerLen+4 {
		return 0
	}
	return binary.LittleEndian.Uint32(m.raw[headerLen:])
}

func readMessage(r *bufio.Reader) (message, error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return message{}, err
	}
	n := int32(binary.LittleEndian.Uint32(hdr[0:])) //nolint:gosec // G115: the wire's int32 length, bit for bit; a negative one is refused just below
	if n < headerLen || n > maxMessage {
		return message{}, fmt.Errorf("message length %d out of range", n)
	}
	raw := make([]byte, n)
	copy(raw, hdr[:])
	if _, err := io.ReadFull(r, raw[headerLen:]); err != nil {
		return message{}, err
	}
	return message{
		raw:       raw,
		requestID: int32(binary.LittleEndian.Uint32(hdr[4:])),  //nolint:gosec // G115: the wire's int32 field, bit for bit
		opCode:    int32(binary.LittleEndian.Uint32(hdr[12:])), //nolint:gosec // G115: the wire's int32 field, bit for bit
	}, nil
}

// withoutMoreToCome returns a copy of an OP_MSG with moreToCome cleared. A
// checksum, if present, covered the old flags, so it is dropped too.
func withoutMoreToCome(raw []byte) []byte {
	flags := binary.LittleEndian.Uint32(raw[headerLen:])
	out := append([]byte(nil), raw...)
	if flags&flagChecksumPresent != 0 {
		out = out[:len(out)-4]
		binary.LittleEndian.PutUint32(out[0:], uint32(len(out))) //nolint:gosec // G115: raw came through readMessage, so it is at most maxMessage
	}
	flags &^= flagMoreToCome | flagChecksumPresent
	binary.LittleEndian.PutUint32(out[headerLen:], flags)
	return out
}

// command is what the front needs to know about a request.
type command struct {
	opCode int32
	name   string
	body   bson.Raw
	// seqs are the OP_MSG document sequences (kind-1 sections), by
	// identifier: insert's "documents", update's "updates", delete's
	// "deletes" when the driver sends them outside the body.
	seqs       map[string][]bson.Raw
	write      bool
	moreToCome bool
	// raw is the whole message, for the allowlist to read an OP_MSG's
	// document sequences, which body leaves out.
	raw []byte
	// strict is the front's mode (Options.Lax off), for refusal: the
	// Firestore rules of strict.go and the allowlist (allowlist.go).
	strict bool
	// loadBalanced is whether this connection's handshake asked for load
	// balanced mode (this request's included).
	loadBalanced bool
}

// inspect parses a request far enough to classify it. Only OP_MSG and
// OP_QUERY (legacy handshakes) are accepted: the front never advertises
// compression, so OP_COMPRESSED means a client that ignored the handshake.
func inspect(m message) (command, error) {
	c := command{opCode: m.opCode, raw: m.raw}
	switch m.opCode {
	case opMsg:
		body, seqs, flags, err := parseOpMsgSections(m.raw)
		if err != nil {
			return c, err
		}
		c.body, c.seqs = body, seqs
		c.moreToCome = flags&flagMoreToCome != 0
	case opQuery:
		body, isCmd, err := parseOpQuery(m.raw)
		if err != nil {
			return c, err
		}
		if !isCmd {
			return c, errors.New("OP_QUERY on a collection (legacy find) is not supported")
		}
		c.body = body
	case opCompressed:
		return c, errors.New("OP_COMPRESSED: the front negotiates no compression")
	default:
		return c, fmt.Errorf("unsupported opCode %d", m.opCode)
	}
	first, err := c.body.IndexErr(0)
	if err != nil {
		return c, fmt.Errorf("command document: %w", err)
	}
	c.name = first.Key()
	c.write = writeCommands[c.name]
	return c, nil
}

// parseOpMsg returns the kind-0 body section and the flag bits.
func parseOpMsg(raw []byte) (bson.Raw, uint32, error) {
	body, _, flags, err := parseOpMsgSections(raw)
	return body, flags, err
}

// parseOpMsgSections returns the kind-0 body section, the document
// sequences (kind-1 sections) by identifier, and the flag bits.
func parseOpMsgSections(raw []byte) (bson.Raw, map[string][]bson.Raw, uint32, error) {
	if len(raw) < headerLen+5 {
		return nil, nil, 0, errors.New("OP_MSG too short")
	}
	flags := binary.LittleEndian.Uint32(raw[headerLen:])
	end := len(raw)
	if flags&flagChecksumPresent != 0 {
		end -= 4
	}
	var body bson.Raw
	var seqs map[string][]bson.Raw
	p := headerLen + 4
	for p < end {
		kind := raw[p]
		p++
		if p+4 > end {
			return nil, nil, 0, errors.New("OP_MSG section truncated")
		}
		size := int(int32(binary.LittleEndian.Uint32(raw[p:]))) //nolint:gosec // G115: the wire's int32 size, bit for bit; a negative one is refused just below
		if size < 5 || p+size > end {
			return nil, nil, 0, fmt.Errorf("OP_MSG section size %d out of range", size)
		}
		switch kind {
		case 0:
			if body != nil {
				return nil, nil, 0, errors.New("OP_MSG has two body sections")
			}
			body = bson.Raw(raw[p : p+size])
			if err := body.Validate(); err != nil {
				return nil, nil, 0, fmt.Errorf("OP_MSG body: %w", err)
			}
		case 1:
			// Document sequence (insert's documents, for example): an
			// int32 size, a C-string identifier, then documents.
			id, docs, err := parseSequence(raw[p+4 : p+size])
			if err != nil {
				return nil, nil, 0, err
			}
			if seqs == nil {
				seqs = map[string][]bson.Raw{}
			}
			seqs[id] = append(seqs[id], docs...)
		default:
			return nil, nil, 0, fmt.Errorf("OP_MSG section kind %d", kind)
		}
		p += size
	}
	if body == nil {
		return nil, nil, 0, errors.New("OP_MSG without a body section")
	}
	return body, seqs, flags, nil
}

// parseSequence splits the payload of a kind-1 section (after its size)
// into its identifier and documents.
func parseSequence(b []byte) (string, []bson.Raw, error) {
	nul := -1
	for i, c := range b {
		if c == 0 {
			nul = i
			break
		}
	}
	if nul < 0 {
		return "", nil, errors.New("OP_MSG document sequence identifier unterminated")
	}
	id := string(b[:nul])
	var docs []bson.Raw
	for p := nul + 1; p < len(b); {
		if p+4 > len(b) {
			return "", nil, errors.New("OP_MSG document sequence truncated")
		}
		n := int(int32(binary.LittleEndian.Uint32(b[p:]))) //nolint:gosec // G115: the wire's int32 size, bit for bit; a negative one is refused just below
		if n < 5 || p+n > len(b) {
			return "", nil, fmt.Errorf("OP_MSG sequence document size %d out of range", n)
		}
		d := bson.Raw(b[p : p+n])
		if err := d.Validate(); err != nil {
			return "", nil, fmt.Errorf("OP_MSG sequence %q: %w", id, err)
		}
		docs = append(docs, d)
		p += n
	}
	return id, docs, nil
}

// parseOpQuery returns the query document of an OP_QUERY and whether it is
// a command (a query on "<db>.$cmd"). A command wrapped in {$query: …} is
// unwrapped.
func parseOpQuery(raw []byte) (bson.Raw, bool, error) {
	p := headerLen + 4 // flags
	nul := -1
	for i := p; i < len(raw); i++ {
		if raw[i] == 0 {
			nul = i
			break
		}
	}
	if nul < 0 {
		return nil, false, errors.New("OP_QUERY collection name unterminated")
	}
	coll := string(raw[p:nul])
	p = nul + 1 + 8 // numberToSkip, numberToReturn
	if p+5 > len(raw) {
		return nil, false, errors.New("OP_QUERY too short")
	}
	size := int(int32(binary.LittleEndian.Uint32(raw[p:]))) //nolint:gosec // G115: the wire's int32 size, bit for bit; a negative one is refused just below
	if size < 5 || p+size > len(raw) {
		return nil, false, fmt.Errorf("OP_QUERY query size %d out of range", size)
	}
	q := bson.Raw(raw[p : p+size])
	if err := q.Validate(); err != nil {
		return nil, false, fmt.Errorf("OP_QUERY query: %w", err)
	}
	if inner, err := q.LookupErr("$query"); err == nil {
		if d, ok := inner.DocumentOK(); ok {
			q = d
		}
	}
	isCmd := len(coll) > 5 && coll[len(coll)-5:] == ".$cmd"
	return q, isCmd, nil
}

// refusal is an error answer the front gives instead of forwarding.
type refusal struct {
	code     int32
	codeName string
	errmsg   string
}

// refusal decides whether Firestore (or baton's stand-in for it) would
// refuse the command. It returns nil to forward it.
func (c command) refusal() *refusal {
	if c.strict {
		if r := c.handshakeRefusal(); r != nil {
			return r
		}
		if r := c.limitRefusal(); r != nil {
			return r
		}
	}
	if _, err := c.body.LookupErr("txnNumber"); err == nil {
		return &refusal{codeIllegalOperation, codeNameIllegalOperation, fmt.Sprintf(
			"%s carries txnNumber: Firestore with MongoDB compatibility does not support retryable writes, "+
				"and baton's emulator does not run transactions; connect with retryWrites=false and make the write idempotent "+
				"(baton's store does: deterministic _id, conditional updates)", c.name)}
	}
	switch c.name {
	case "startTransaction", "commitTransaction", "abortTransaction":
		return &refusal{codeIllegalOperation, codeNameIllegalOperation, c.name +
			": baton's Firestore emulator does not support transactions (FerretDB v1 has none); " +
			"baton uses single-document conditional writes instead"}
	}
	if _, err := c.body.LookupErr("startTransaction"); err == nil {
		return &refusal{codeIllegalOperation, codeNameIllegalOperation, c.name +
			" with startTransaction: baton's Firestore emulator does not support transactions (FerretDB v1 has none); " +
			"baton uses single-document conditional writes instead"}
	}
	if c.name == "aggregate" && hasChangeStream(c.body) {
		return &refusal{codeChangeStreamNotHere, codeNameChangeStream,
			"$changeStream is not supported: baton's Firestore emulator has no change streams " +
				"(Firestore offers them only as a preview that must be created with gcloud first); poll on (updatedAt, _id) instead"}
	}
	if c.strict {
		return allowlistRefusal(c)
	}
	return nil
}

// hasChangeStream reports whether an aggregate pipeline contains a
// $changeStream stage (collection.Watch and database.Watch send one first).
func hasChangeStream(body bson.Raw) bool {
	v, err := body.LookupErr("pipeline")
	if err != nil {
		return false
	}
	stages, ok := v.ArrayOK()
	if !ok {
		return false
	}
	vals, err := stages.Values()
	if err != nil {
		return false
	}
	for _, s := range vals {
		d, ok := s.DocumentOK()
		if !ok {
			continue
		}
		if _, err := d.LookupErr("$changeStream"); err == nil {
			return true
		}
	}
	return false
}

// doc is the refusal as a command reply.
func (r *refusal) doc() bson.D {
	d := bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: r.errmsg}, {Key: "code", Value: r.code}}
	if r.codeName != "" {
		d = append(d, bson.E{Key: "codeName", Value: r.codeName})
	}
	return d
}

// answer replies to req with doc instead of forwarding it.
func (f *front) answer(req message, cmd command, client net.Conn, doc bson.D) error {
	if cmd.moreToCome {
		return nil // the client asked for no reply
	}
	reply, err := replyTo(req, doc)
	if err != nil {
		return err
	}
	_, err = client.Write(reply)
	return err
}

// replyTo builds the answer to req: an OP_MSG for an OP_MSG, an OP_REPLY
// for a legacy OP_QUERY.
func replyTo(req message, d bson.D) ([]byte, error) {
	doc, err := bson.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("build reply: %w", err)
	}
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0)                     // length, patched below
	b = binary.LittleEndian.AppendUint32(b, 0)                     // requestID
	b = binary.LittleEndian.AppendUint32(b, uint32(req.requestID)) //nolint:gosec // G115: the wire's int32 field, bit for bit
	if req.opCode == opQuery {
		b = binary.LittleEndian.AppendUint32(b, opReply)
		b = binary.LittleEndian.AppendUint32(b, 0) // responseFlags
		b = binary.LittleEndian.AppendUint64(b, 0) // cursorID
		b = binary.LittleEndian.AppendUint32(b, 0) // startingFrom
		b = binary.LittleEndian.AppendUint32(b, 1) // numberReturned
	} else {
		b = binary.LittleEndian.AppendUint32(b, opMsg)
		b = binary.LittleEndian.AppendUint32(b, 0) // flagBits
		b = append(b, 0)                           // section kind 0
	}
	b = append(b, doc...)
	binary.LittleEndian.PutUint32(b[0:], uint32(len(b))) //nolint:gosec // G115: a header and one BSON document, which is at most 16 MiB
	return b, nil
}
