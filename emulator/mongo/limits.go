package mongo

import (
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Limits Firestore with MongoDB compatibility documents on what it stores
// (Naming, Documents and _id on
// https://cloud.google.com/firestore/mongodb-compatibility/docs/behavior-differences).
// Google has published two versions of that page: one with a 4 MiB
// document and _id only an ObjectId, a string or a 64-bit integer (not ""
// nor 0), a later one with 16 MiB and more _id types. Strict mode enforces
// the first, the narrower: code that passes it passes both.
const (
	// maxDocumentBytes: "The maximum document size is 4 MiB."
	maxDocumentBytes = 4 << 20
	// maxNesting: "The maximum nesting depth of fields is 20. Each Array
	// and Object-typed field adds one level to the overall depth." Read
	// here as: at most 20 Objects and Arrays nested inside one another,
	// the document itself not counted.
	maxNesting = 20
)

// Firestore refuses such values as InvalidArgument, which it answers with
// code 2 ("InvalidArgument (2)",
// https://cloud.google.com/firestore/mongodb-compatibility/docs/understand-error-codes);
// 2 is MongoDB's BadValue.
const (
	codeBadValue     = 2
	codeNameBadValue = "BadValue"
)

// limitRefusal checks the documents a write would store: inserted
// documents, replacement documents and the values of update operators
// (update, findAndModify, upserts included). It cannot see the document an
// update produces, so an update that grows a document past 4 MiB is not
// caught here; only its own size is.
func (c command) limitRefusal() *refusal {
	var err error
	switch c.name {
	case "insert":
		for _, d := range c.docs("documents") {
			if err = checkStored(d, true); err != nil {
				break
			}
		}
	case "update":
		for _, st := range c.docs("updates") {
			if u, ok := st.Lookup("u").DocumentOK(); ok {
				if err = checkUpdate(u); err != nil {
					break
				}
			}
		}
	case "findAndModify", "findandmodify":
		if u, ok := c.body.Lookup("update").DocumentOK(); ok {
			err = checkUpdate(u)
		}
	default:
		return nil
	}
	if err == nil {
		return nil
	}
	return &refusal{codeBadValue, codeNameBadValue, fmt.Sprintf("%s: %v (Firestore with MongoDB compatibility, %s)", c.name, err, urlBehaviour)}
}

// checkUpdate checks an update document: a replacement is checked as a
// stored document (its _id optional); an operator document ($set, …) has
// each path's segments checked as field names, and each value nested at
// the path's depth.
func checkUpdate(u bson.Raw) error {
	elems, err := u.Elements()
	if err != nil || len(elems) == 0 {
		return nil
	}
	if !strings.HasPrefix(elems[0].Key(), "$") {
		return checkStored(u, false)
	}
	if len(u) > maxDocumentBytes {
		return fmt.Errorf("the update is %d bytes; the maximum document size is 4 MiB", len(u))
	}
	for _, op := range elems {
		fields, ok := op.Value().DocumentOK()
		if !ok {
			continue
		}
		fe, err := fields.Elements()
		if err != nil {
			continue
		}
		for _, f := range fe {
			segs := strings.Split(f.Key(), ".")
			for _, s := range segs {
				if err := checkName(s); err != nil {
					return err
				}
			}
			if op.Key() == "$unset" || op.Key() == "$inc" || op.Key() == "$rename" {
				continue
			}
			if err := checkValue(f.Key(), f.Value(), len(segs)-1); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkStored checks a document as stored: size, names, nesting, and the
// type of its _id (required when needID).
func checkStored(d bson.Raw, needID bool) error {
	if len(d) > maxDocumentBytes {
		return fmt.Errorf("the document is %d bytes; the maximum document size is 4 MiB", len(d))
	}
	if id, err := d.LookupErr("_id"); err == nil {
		if err := checkID(id); err != nil {
			return err
		}
	} else if needID {
		return nil // the server assigns an ObjectId
	}
	return checkFields(d, 0)
}

// checkID: "Document _id (top-level field) must be an ObjectId, String, or
// 64-bit integer. Other BSON types are not supported. Empty string ("")
// and 64-bit 0 (0L) are not supported." A 32-bit integer is taken as an
// integer too: drivers write small Go ints as int32.
func checkID(v bson.RawValue) error {
	switch v.Type {
	case bson.TypeObjectID:
		return nil
	case bson.TypeString:
		s := v.StringValue()
		if s == "" {
			return fmt.Errorf("_id is the empty string, which is not supported")
		}
		if isReservedName(s) {
			return fmt.Errorf("_id %q matches __.*__, which is not supported", s)
		}
		return nil
	case bson.TypeInt32, bson.TypeInt64:
		if n, _ := v.AsInt64OK(); n == 0 {
			return fmt.Errorf("_id is the integer 0, which is not supported")
		}
		return nil
	}
	return fmt.Errorf("_id is a %s; it must be an ObjectId, a string or a 64-bit integer", v.Type)
}

// checkFields walks a document's fields, checking names and nesting;
// depth is the number of Objects and Arrays around d.
func checkFields(d bson.Raw, depth int) error {
	elems, err := d.Elements()
	if err != nil {
		return nil // FerretDB answers a malformed document itself
	}
	for _, e := range elems {
		if err := checkName(e.Key()); err != nil {
			return err
		}
		if err := checkValue(e.Key(), e.Value(), depth); err != nil {
			return err
		}
	}
	return nil
}

// checkValue checks one value found at depth: an Object or an Array adds
// a level, and an Object's field names are checked too.
func checkValue(name string, v bson.RawValue, depth int) error {
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		if depth+1 > maxNesting {
			return fmt.Errorf("field %q nests deeper than 20 levels, the maximum nesting depth", name)
		}
		return checkFields(v.Document(), depth+1)
	case bson.TypeArray:
		if depth+1 > maxNesting {
			return fmt.Errorf("field %q nests deeper than 20 levels, the maximum nesting depth", name)
		}
		vals, err := v.Array().Values()
		if err != nil {
			return nil
		}
		for _, x := range vals {
			if err := checkValue(name, x, depth+1); err != nil {
				return err
			}
		}
	case bson.TypeJavaScript, bson.TypeSymbol, bson.TypeDBPointer, bson.TypeUndefined, bson.TypeCodeWithScope:
		// "The JavaScript, Symbol, DBPointer, and Undefined BSON types are
		// not supported."
		return fmt.Errorf("field %q is a %s, a BSON type that is not supported", name, v.Type)
	}
	return nil
}

// checkName: "Field names matching __.*__ are not supported. Empty field
// names are not supported."
func checkName(n string) error {
	if n == "" {
		return fmt.Errorf("a field name is empty, which is not supported")
	}
	if isReservedName(n) {
		return fmt.Errorf("field name %q matches __.*__, which is not supported", n)
	}
	return nil
}

func isReservedName(n string) bool {
	return len(n) >= 4 && strings.HasPrefix(n, "__") && strings.HasSuffix(n, "__")
}
