package mongo

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// codeFailPoint is the error code a failing command gets when the fail
// point names none, as in mongod's failCommand.
const codeFailPoint = 1

// failPoint is mongod's "failCommand" fail point, which mongod offers to
// tests (enableTestCommands=1) and the Go driver's own tests use. Turned on
// with configureFailPoint, it answers matching commands with an error, or
// cuts the connection, instead of forwarding them. Tests use it to inject
// database faults at the wire, with the real driver and store code in the
// path.
//
// Supported, as in mongod: mode "alwaysOn", "off", {times: n} and
// {skip: n}; data.failCommands, data.errorCode, data.closeConnection and
// data.writeConcernError (the command runs, then the reply reports it).
// data.namespace ("db.collection") is baton's addition: it limits the fail
// point to one collection, so tests sharing the emulator do not see each
// other's faults, and a test can fail one write among several.
// data.errorCodeAfterRun (an integer) is baton's addition too: the command
// runs, and its reply is then replaced by a top-level error with that code
// ({ok: 0, code}). mongod has no such option; it stands for Firestore
// answering DeadlineExceeded (262) for a write that committed, the lost
// answer a write concern error cannot model, since a driver reads a write
// concern error as "applied" and a top-level error as "maybe not".
type failPoint struct {
	mu        sync.Mutex
	on        bool
	times     int // matches left to fail; < 0 means no limit
	skip      int // matches to let through first
	commands  map[string]bool
	namespace string
	code      int32
	close     bool
	wce       bson.Raw // data.writeConcernError: run the command, then report this
	afterRun  int32    // data.errorCodeAfterRun: run the command, then answer this code
	entered   int64
}

// configure applies a configureFailPoint command and returns the reply.
func (fp *failPoint) configure(body bson.Raw) bson.D {
	fail := func(msg string) bson.D {
		return bson.D{{Key: "ok", Value: 0.0}, {Key: "errmsg", Value: msg}, {Key: "code", Value: int32(2)}, {Key: "codeName", Value: "BadValue"}}
	}
	name, _ := body.Lookup("configureFailPoint").StringValueOK()
	if name != "failCommand" {
		return fail(fmt.Sprintf("configureFailPoint: baton's Mongo emulator has only the failCommand fail point, not %q", name))
	}
	next := failPoint{times: -1, commands: map[string]bool{}, code: codeFailPoint}
	mode := body.Lookup("mode")
	modeName, _ := mode.StringValueOK()
	switch {
	case modeName == "alwaysOn":
		next.on = true
	case modeName == "off":
	case mode.Type == bson.TypeEmbeddedDocument:
		m := mode.Document()
		if v, err := m.LookupErr("times"); err == nil {
			n, ok := v.AsInt64OK()
			if !ok || n < 0 {
				return fail("configureFailPoint: mode.times must be a non-negative integer")
			}
			next.on, next.times = n > 0, int(n)
		} else if v, err := m.LookupErr("skip"); err == nil {
			n, ok := v.AsInt64OK()
			if !ok || n < 0 {
				return fail("configureFailPoint: mode.skip must be a non-negative integer")
			}
			next.on, next.skip = true, int(n)
		} else {
			return fail("configureFailPoint: mode must be \"alwaysOn\", \"off\", {times: n} or {skip: n}")
		}
	default:
		return fail("configureFailPoint: mode must be \"alwaysOn\", \"off\", {times: n} or {skip: n}")
	}
	if next.on {
		data, ok := body.Lookup("data").DocumentOK()
		if !ok {
			return fail("configureFailPoint: failCommand needs data.failCommands")
		}
		cmds, ok := data.Lookup("failCommands").ArrayOK()
		vals, err := cmds.Values()
		if !ok || err != nil || len(vals) == 0 {
			return fail("configureFailPoint: data.failCommands must be a non-empty array of command names")
		}
		for _, v := range vals {
			s, ok := v.StringValueOK()
			if !ok {
				return fail("configureFailPoint: data.failCommands must hold command names")
			}
			next.commands[s] = true
		}
		if v, err := data.LookupErr("errorCode"); err == nil {
			n, ok := v.AsInt64OK()
			if !ok || n < math.MinInt32 || n > math.MaxInt32 {
				return fail("configureFailPoint: data.errorCode must be a 32-bit integer")
			}
			next.code = int32(n)
		}
		next.close, _ = data.Lookup("closeConnection").BooleanOK()
		if v, err := data.LookupErr("writeConcernError"); err == nil {
			d, ok := v.DocumentOK()
			if !ok {
				return fail("configureFailPoint: data.writeConcernError must be a document {code, errmsg}")
			}
			next.wce = append(bson.Raw(nil), d...)
		}
		if v, err := data.LookupErr("errorCodeAfterRun"); err == nil {
			n, ok := v.AsInt64OK()
			if !ok || n == 0 || n < math.MinInt32 || n > math.MaxInt32 {
				return fail("configureFailPoint: data.errorCodeAfterRun must be a non-zero 32-bit integer")
			}
			next.afterRun = int32(n)
		}
		next.namespace, _ = data.Lookup("namespace").StringValueOK()
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	count := fp.entered
	next.entered = count
	fp.on, fp.times, fp.skip, fp.commands, fp.namespace, fp.code, fp.close, fp.wce, fp.afterRun = next.on, next.times, next.skip, next.commands, next.namespace, next.code, next.close, next.wce, next.afterRun
	return bson.D{{Key: "count", Value: count}, {Key: "ok", Value: 1.0}}
}

// errCloseConnection asks the front to cut the client's connection.
var errCloseConnection = errors.New("failCommand fail point: closeConnection")

// failAction is what the fail point does to one command: nothing (zero),
// refuse it, cut the connection, or run it and report a write concern
// error or answer a top-level error (the write lands, yet the client sees
// an error: the "applied, but the answer says otherwise" case).
type failAction struct {
	refuse   *refusal
	close    bool
	wce      bson.Raw
	afterRun *refusal
}

// check decides what the fail point does to cmd.
func (fp *failPoint) check(cmd command) failAction {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if !fp.on || !fp.commands[cmd.name] || fp.namespace != "" && fp.namespace != cmd.namespace() {
		return failAction{}
	}
	if fp.skip > 0 {
		fp.skip--
		return failAction{}
	}
	fp.entered++
	if fp.times > 0 {
		fp.times--
		if fp.times == 0 {
			fp.on = false
		}
	}
	switch {
	case fp.close:
		return failAction{close: true}
	case fp.wce != nil:
		return failAction{wce: fp.wce}
	case fp.afterRun != 0:
		return failAction{afterRun: &refusal{fp.afterRun, "", fmt.Sprintf("Failing command %s after it ran, via 'failCommand' failpoint (errorCodeAfterRun)", cmd.name)}}
	}
	return failAction{refuse: &refusal{fp.code, "", fmt.Sprintf("Failing command %s via 'failCommand' failpoint", cmd.name)}}
}

// withWriteConcernError returns the OP_MSG reply with writeConcernError
// added to its body, answering req.
func withWriteConcernError(req message, reply message, wce bson.Raw) ([]byte, error) {
	body, _, err := parseOpMsg(reply.raw)
	if err != nil {
		return nil, fmt.Errorf("write concern error: reply: %w", err)
	}
	elems, err := body.Elements()
	if err != nil {
		return nil, fmt.Errorf("write concern error: reply: %w", err)
	}
	d := make(bson.D, 0, len(elems)+1)
	for _, e := range elems {
		d = append(d, bson.E{Key: e.Key(), Value: e.Value()})
	}
	d = append(d, bson.E{Key: "writeConcernError", Value: wce})
	return replyTo(req, d)
}

// namespace is "db.collection" for commands whose first value names a
// collection (find, insert, update, …), and "db" otherwise.
func (c command) namespace() string {
	db, _ := c.body.Lookup("$db").StringValueOK()
	if coll, ok := c.body.Index(0).Value().StringValueOK(); ok {
		return db + "." + coll
	}
	return db
}
