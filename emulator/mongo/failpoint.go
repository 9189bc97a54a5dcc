package mongo

import (
	"errors"
	"fmt"
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
// {skip: n}; data.failCommands, data.errorCode and data.closeConnection.
// data.namespace ("db.collection") is baton's addition: it limits the fail
// point to one collection, so tests sharing the emulator do not see each
// other's faults, and a test can fail one write among several.
type failPoint struct {
	mu        sync.Mutex
	on        bool
	times     int // matches left to fail; < 0 means no limit
	skip      int // matches to let through first
	commands  map[string]bool
	namespace string
	code      int32
	close     bool
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
			if !ok {
				return fail("configureFailPoint: data.errorCode must be an integer")
			}
			next.code = int32(n)
		}
		next.close, _ = data.Lookup("closeConnection").BooleanOK()
		next.namespace, _ = data.Lookup("namespace").StringValueOK()
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	count := fp.entered
	next.entered = count
	fp.on, fp.times, fp.skip, fp.commands, fp.namespace, fp.code, fp.close = next.on, next.times, next.skip, next.commands, next.namespace, next.code, next.close
	return bson.D{{Key: "count", Value: count}, {Key: "ok", Value: 1.0}}
}

// errCloseConnection asks the front to cut the client's connection.
var errCloseConnection = errors.New("failCommand fail point: closeConnection")

// check reports whether cmd must fail, and how: a refusal to answer with,
// or errCloseConnection.
func (fp *failPoint) check(cmd command) (*refusal, error) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	if !fp.on || !fp.commands[cmd.name] || fp.namespace != "" && fp.namespace != cmd.namespace() {
		return nil, nil
	}
	if fp.skip > 0 {
		fp.skip--
		return nil, nil
	}
	fp.entered++
	if fp.times > 0 {
		fp.times--
		if fp.times == 0 {
			fp.on = false
		}
	}
	if fp.close {
		return nil, errCloseConnection
	}
	return &refusal{fp.code, "", fmt.Sprintf("Failing command %s via 'failCommand' failpoint", cmd.name)}, nil
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
