package mongo

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// rawConn speaks the wire protocol by hand, for what a driver will not send
// (moreToCome writes with a checksum, legacy OP_QUERY) or where the test
// must see the bytes (responseTo).
type rawConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, uri string) *rawConn {
	t.Helper()
	u, err := url.Parse(uri)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("dial %s: %v", u.Host, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

func mustMarshal(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// buildOpMsg builds an OP_MSG with one body section; with the checksum flag it
// appends the CRC-32C the protocol asks for.
func buildOpMsg(requestID int32, flags uint32, body []byte) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(requestID))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, opMsg)
	b = binary.LittleEndian.AppendUint32(b, flags)
	b = append(b, 0)
	b = append(b, body...)
	if flags&flagChecksumPresent != 0 {
		binary.LittleEndian.PutUint32(b, uint32(len(b)+4))
		sum := crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
		b = binary.LittleEndian.AppendUint32(b, sum)
	} else {
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
	}
	return b
}

// buildOpQuery builds a legacy OP_QUERY on coll.
func buildOpQuery(requestID int32, coll string, query []byte) []byte {
	var b []byte
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(requestID))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, opQuery)
	b = binary.LittleEndian.AppendUint32(b, 0) // flags
	b = append(b, coll...)
	b = append(b, 0)
	b = binary.LittleEndian.AppendUint32(b, 0)          // numberToSkip
	b = binary.LittleEndian.AppendUint32(b, 0xffffffff) // numberToReturn -1
	b = append(b, query...)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	return b
}

func (rc *rawConn) send(b []byte) {
	rc.t.Helper()
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// recv reads one reply and returns its responseTo and body document.
func (rc *rawConn) recv() (responseTo int32, body bson.Raw) {
	rc.t.Helper()
	m, err := readMessage(rc.r)
	if err != nil {
		rc.t.Fatalf("read reply: %v", err)
	}
	responseTo = int32(binary.LittleEndian.Uint32(m.raw[8:]))
	switch m.opCode {
	case opMsg:
		body, _, err = parseOpMsg(m.raw)
	case opReply:
		body = bson.Raw(m.raw[headerLen+20:])
		err = body.Validate()
	default:
		rc.t.Fatalf("reply opCode %d", m.opCode)
	}
	if err != nil {
		rc.t.Fatalf("reply body: %v", err)
	}
	return responseTo, body
}

func okValue(body bson.Raw) float64 {
	v, err := body.LookupErr("ok")
	if err != nil {
		return -1
	}
	f, _ := v.AsFloat64OK()
	return f
}

func TestWireRefusalAnswersTheRequest(t *testing.T) {
	t.Parallel()
	db := connect(t, testServer.URI())
	rc := dialRaw(t, testServer.URI())
	rc.send(buildOpMsg(4242, 0, mustMarshal(t, bson.D{
		{Key: "insert", Value: "w"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}},
		{Key: "txnNumber", Value: int64(1)}, {Key: "$db", Value: db.Name()},
	})))
	to, body := rc.recv()
	if to != 4242 || okValue(body) != 0 || body.Lookup("code").AsInt64() != 20 {
		t.Errorf("refusal: responseTo %d (want 4242), body %s", to, body)
	}
	if n, err := db.Collection("w").CountDocuments(context.Background(), bson.D{}); err != nil || n != 0 {
		t.Errorf("count after refusal = %d, %v; want 0", n, err)
	}
}

// TestWireMoreToCome: a write sent with moreToCome gets no reply (the next
// reply on the connection answers the next request) and is still applied,
// and a checksummed message passes.
func TestWireMoreToCome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := connect(t, testServer.URI())
	rc := dialRaw(t, testServer.URI())
	for i, flags := range []uint32{flagMoreToCome, flagMoreToCome | flagChecksumPresent} {
		rc.send(buildOpMsg(int32(10+i), flags, mustMarshal(t, bson.D{
			{Key: "insert", Value: "w"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: i + 1}}}},
			{Key: "writeConcern", Value: bson.D{{Key: "w", Value: 0}}}, {Key: "$db", Value: db.Name()},
		})))
	}
	// A refused command with moreToCome gets no reply either.
	rc.send(buildOpMsg(12, flagMoreToCome, mustMarshal(t, bson.D{
		{Key: "insert", Value: "w"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 99}}}},
		{Key: "txnNumber", Value: int64(1)}, {Key: "$db", Value: db.Name()},
	})))
	rc.send(buildOpMsg(13, flagChecksumPresent, mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: db.Name()}})))
	to, body := rc.recv()
	if to != 13 || okValue(body) != 1 {
		t.Fatalf("first reply: responseTo %d (want 13, the ping), body %s", to, body)
	}
	n, err := db.Collection("w").CountDocuments(ctx, bson.D{})
	if err != nil || n != 2 {
		t.Errorf("documents after two moreToCome inserts and one refused = %d, %v; want 2", n, err)
	}
}

func TestWireLegacyOpQuery(t *testing.T) {
	t.Parallel()
	rc := dialRaw(t, testServer.URI())
	// A legacy handshake is never in load balanced mode (a driver in that
	// mode sends hello over OP_MSG), so strict mode answers it with an
	// OP_REPLY refusal naming Firestore's Connect page.
	rc.send(buildOpQuery(7, "admin.$cmd", mustMarshal(t, bson.D{{Key: "isMaster", Value: 1}})))
	to, body := rc.recv()
	if msg, _ := body.Lookup("errmsg").StringValueOK(); to != 7 || okValue(body) != 0 || !strings.Contains(msg, urlConnect) {
		t.Errorf("isMaster over OP_QUERY: responseTo %d, body %s; want a refusal naming %s", to, body, urlConnect)
	}
	rc.send(buildOpQuery(8, "admin.$cmd", mustMarshal(t, bson.D{{Key: "$query", Value: bson.D{
		{Key: "insert", Value: "w"}, {Key: "documents", Value: bson.A{bson.D{{Key: "_id", Value: 1}}}}, {Key: "txnNumber", Value: int64(1)},
	}}})))
	to, body = rc.recv()
	if to != 8 || okValue(body) != 0 || body.Lookup("codeName").StringValue() != "IllegalOperation" {
		t.Errorf("txnNumber over OP_QUERY: responseTo %d, body %s", to, body)
	}
}

func TestWireGarbageClosesConnection(t *testing.T) {
	t.Parallel()
	rc := dialRaw(t, testServer.URI())
	rc.send([]byte{8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) // length 8 < header
	if _, err := rc.r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("read after garbage = %v, want EOF", err)
	}
}

// TestWireExhaustReplies checks that a reply with moreToCome is followed by
// more replies to the same request. FerretDB never streams replies, so the
// backend here is a scripted TCP server: a test double at the one edge no
// emulator covers.
func TestWireExhaustReplies(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		req, err := readMessage(br)
		if err != nil {
			return
		}
		for i := 0; i < 3; i++ {
			flags := uint32(flagMoreToCome)
			if i == 2 {
				flags = 0
			}
			b := buildOpMsg(int32(100+i), flags, mustMarshal(t, bson.D{{Key: "ok", Value: 1.0}, {Key: "n", Value: i}}))
			binary.LittleEndian.PutUint32(b[8:], uint32(req.requestID))
			if _, err := c.Write(b); err != nil {
				return
			}
		}
		_, _ = io.Copy(io.Discard, br)
	}()
	// Lax: a streaming hello is topology monitoring, which only a driver
	// outside load balanced mode runs, and strict mode refuses that
	// handshake.
	f, err := startFront("127.0.0.1:0", "mongodb://"+ln.Addr().String()+"/", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	uri := f.uri()
	defer func() {
		if err := f.close(); err != nil {
			t.Errorf("close front: %v", err)
		}
	}()
	rc := dialRaw(t, uri)
	rc.send(buildOpMsg(5, 1<<16, mustMarshal(t, bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})))
	for i := 0; i < 3; i++ {
		to, body := rc.recv()
		if to != 5 || body.Lookup("n").Int32() != int32(i) {
			t.Errorf("streamed reply %d: responseTo %d, body %s", i, to, body)
		}
	}
}

func TestCloseStopsListenerAndConnections(t *testing.T) {
	t.Parallel()
	s, err := Start(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, s.URI())
	rc.send(buildOpMsg(1, 0, mustMarshal(t, bson.D{{Key: "ping", Value: 1}, {Key: "$db", Value: "admin"}})))
	if to, body := rc.recv(); to != 1 || okValue(body) != 1 {
		t.Fatalf("ping: responseTo %d, body %s", to, body)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := rc.r.ReadByte(); err == nil {
		t.Error("open connection still readable after Close")
	}
	u, _ := url.Parse(s.URI())
	if c, err := net.Dial("tcp", u.Host); err == nil {
		c.Close()
		t.Error("listener still accepting after Close")
	}
}
