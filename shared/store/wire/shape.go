package wire

import (
	"slices"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Kind says where in a command a feature sits, and so which of Google's
// tables lists it.
type Kind string

// The kinds of feature a command can use.
const (
	KindCommand     Kind = "command"
	KindOption      Kind = "option"       // a top-level field of a command, or of one of its statements
	KindStage       Kind = "stage"        // an aggregation stage
	KindQuery       Kind = "query"        // a query operator, in a filter
	KindUpdate      Kind = "update"       // an update operator or modifier
	KindProjection  Kind = "projection"   // a projection operator, or a plain inclusion or exclusion
	KindAccumulator Kind = "accumulator"  // a $group accumulator
	KindIndexOption Kind = "index option" // a field of a createIndexes index spec, or an index type
)

// Plain projections have no operator of their own; Google's table lists
// only the operators, so these stand for "a field: 1" and "a field: 0".
const (
	ProjectionInclude = "<include>"
	ProjectionExclude = "<exclude>"
)

// Plumbing are the top-level fields every driver adds to every command:
// the database, the session, gossiped cluster time and the stable-API
// fields. They say how to run the command, not what it does, so they are
// not options of any command.
var Plumbing = map[string]bool{
	"$db":                  true,
	"lsid":                 true,
	"$clusterTime":         true,
	"apiVersion":           true,
	"apiStrict":            true,
	"apiDeprecationErrors": true,
}

// Feature is one thing a command uses. Option features are per command
// (the same name means different things in find and in update), so they
// carry the command, or "command.statements" for a statement's fields
// (update's updates, delete's deletes). Every other kind is the same
// feature wherever it appears.
type Feature struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
}

// String is "kind name", as refusals and test failures print it.
func (f Feature) String() string { return string(f.Kind) + " " + f.Name }

// Shape is what a command uses, without its values. Each list is sorted
// and without repeats, so equal shapes marshal alike.
type Shape struct {
	Command      string   `json:"command"`
	Wrapped      []string `json:"wrapped,omitempty"` // the command explain explains
	Options      []string `json:"options,omitempty"`
	Stages       []string `json:"stages,omitempty"`
	Query        []string `json:"query,omitempty"`
	Update       []string `json:"update,omitempty"`
	Projection   []string `json:"projection,omitempty"`
	Accumulators []string `json:"accumulators,omitempty"`
	IndexOptions []string `json:"indexOptions,omitempty"`
}

// Key is a string equal for equal shapes, for deduplication.
func (s Shape) Key() string {
	var b strings.Builder
	b.WriteString(s.Command)
	for _, l := range [][]string{s.Wrapped, s.Options, s.Stages, s.Query, s.Update, s.Projection, s.Accumulators, s.IndexOptions} {
		b.WriteByte('|')
		b.WriteString(strings.Join(l, ","))
	}
	return b.String()
}

// Features lists the shape's features: the command first, then the rest.
func (s Shape) Features() []Feature {
	out := []Feature{{KindCommand, s.Command}}
	add := func(k Kind, names []string) {
		for _, n := range names {
			out = append(out, Feature{k, n})
		}
	}
	add(KindCommand, s.Wrapped)
	add(KindOption, s.Options)
	add(KindStage, s.Stages)
	add(KindQuery, s.Query)
	add(KindUpdate, s.Update)
	add(KindProjection, s.Projection)
	add(KindAccumulator, s.Accumulators)
	add(KindIndexOption, s.IndexOptions)
	return out
}

// Sequences are an OP_MSG's document sequences (kind-1 sections) by
// identifier: insert's documents, update's updates, delete's deletes. The
// driver sends a batch's statements there rather than in the body; its
// command monitor folds them back into the command, the wire does not.
type Sequences map[string][]bson.Raw

// Of returns the shape of cmd, a command document as the driver sends it
// (first key the command name), with seqs its document sequences (nil
// when none, or when cmd already holds them, as a command monitor's copy
// does).
func Of(cmd bson.Raw, seqs Sequences) Shape {
	x := extractor{sets: map[Kind]map[string]bool{}}
	elems, err := cmd.Elements()
	if err != nil || len(elems) == 0 {
		return Shape{}
	}
	name := elems[0].Key()
	x.shape.Command = name
	// The command's own value (a collection name, or explain's command)
	// is read by its name, and is no option.
	fields := map[string]bson.RawValue{name: elems[0].Value()}
	for _, e := range elems[1:] {
		k := e.Key()
		if Plumbing[k] {
			continue
		}
		fields[k] = e.Value()
		x.add(KindOption, name+"."+k)
	}
	for id, docs := range seqs {
		if Plumbing[id] {
			continue
		}
		x.add(KindOption, name+"."+id)
		arr := bson.Raw(docArray(docs))
		fields[id] = bson.RawValue{Type: bson.TypeArray, Value: arr}
	}
	x.command(name, fields)
	return x.finish()
}

// docArray encodes docs as a BSON array, so that a sequence reads like
// the body field the command monitor shows in its place.
func docArray(docs []bson.Raw) []byte {
	a := bson.A{}
	for _, d := range docs {
		a = append(a, d)
	}
	_, b, err := bson.MarshalValue(a)
	if err != nil {
		return nil
	}
	return b
}

type extractor struct {
	shape Shape
	sets  map[Kind]map[string]bool
}

func (x *extractor) add(k Kind, name string) {
	if x.sets[k] == nil {
		x.sets[k] = map[string]bool{}
	}
	x.sets[k][name] = true
}

func (x *extractor) finish() Shape {
	list := func(k Kind) []string {
		var out []string
		for n := range x.sets[k] {
			out = append(out, n)
		}
		slices.Sort(out)
		return out
	}
	s := x.shape
	s.Wrapped = list(KindCommand)
	s.Options = list(KindOption)
	s.Stages = list(KindStage)
	s.Query = list(KindQuery)
	s.Update = list(KindUpdate)
	s.Projection = list(KindProjection)
	s.Accumulators = list(KindAccumulator)
	s.IndexOptions = list(KindIndexOption)
	return s
}

// command walks the fields of one command that carry filters, updates,
// projections, pipelines, statements and index specs.
func (x *extractor) command(name string, f map[string]bson.RawValue) {
	doc := func(k string) (bson.Raw, bool) {
		v, ok := f[k]
		if !ok {
			return nil, false
		}
		return v.DocumentOK()
	}
	switch strings.ToLower(name) {
	case "find":
		if d, ok := doc("filter"); ok {
			x.filter(d)
		}
		if d, ok := doc("projection"); ok {
			x.projection(d)
		}
	case "findandmodify":
		if d, ok := doc("query"); ok {
			x.filter(d)
		}
		if d, ok := doc("fields"); ok {
			x.projection(d)
		}
		if v, ok := f["update"]; ok {
			x.update(v)
		}
	case "count", "distinct":
		if d, ok := doc("query"); ok {
			x.filter(d)
		}
	case "aggregate":
		if v, ok := f["pipeline"]; ok {
			x.pipeline(v)
		}
	case "update":
		x.statements(name, f["updates"], func(st map[string]bson.RawValue) {
			if q, ok := st["q"]; ok {
				if d, ok := q.DocumentOK(); ok {
					x.filter(d)
				}
			}
			if u, ok := st["u"]; ok {
				x.update(u)
			}
		})
	case "delete":
		x.statements(name, f["deletes"], func(st map[string]bson.RawValue) {
			if q, ok := st["q"]; ok {
				if d, ok := q.DocumentOK(); ok {
					x.filter(d)
				}
			}
		})
	case "createindexes":
		for _, spec := range documents(f["indexes"]) {
			x.indexSpec(spec)
		}
	case "explain":
		// explain wraps the command it explains: its shape is the
		// inner command's features too.
		if d, ok := doc("explain"); ok {
			inner := Of(d, nil)
			x.add(KindCommand, inner.Command)
			for _, ft := range inner.Features()[1:] {
				x.add(ft.Kind, ft.Name)
			}
		}
	}
}

// statements records the fields of each statement of an update or delete
// (q, u, upsert, multi, limit, …) as options of "<command>.statements",
// and hands each to walk.
func (x *extractor) statements(name string, v bson.RawValue, walk func(map[string]bson.RawValue)) {
	for _, st := range documents(v) {
		elems, _ := st.Elements()
		fields := map[string]bson.RawValue{}
		for _, e := range elems {
			fields[e.Key()] = e.Value()
			x.add(KindOption, name+".statements."+e.Key())
		}
		walk(fields)
	}
}

// filter records the query operators of a filter document, however deep:
// under a field ({f: {$gt: 1}}), in $and/$or/$nor, in $not and
// $elemMatch. A document value without operators is a literal (an
// equality on a subdocument), and is not read further. $expr is recorded,
// its aggregation expression is not.
func (x *extractor) filter(d bson.Raw) {
	elems, _ := d.Elements()
	for _, e := range elems {
		k := e.Key()
		if strings.HasPrefix(k, "$") {
			x.add(KindQuery, k)
			switch k {
			case "$and", "$or", "$nor":
				for _, sub := range documents(e.Value()) {
					x.filter(sub)
				}
			}
			continue
		}
		if sub, ok := e.Value().DocumentOK(); ok && isOperatorDoc(sub) {
			x.operators(sub)
		}
	}
}

// operators records an operator document ({$gt: 1, $lt: 5}) under a field.
func (x *extractor) operators(d bson.Raw) {
	elems, _ := d.Elements()
	for _, e := range elems {
		k := e.Key()
		if k == "$options" {
			continue // $regex's flags, part of $regex
		}
		x.add(KindQuery, k)
		sub, ok := e.Value().DocumentOK()
		if !ok {
			continue
		}
		switch k {
		case "$not":
			if isOperatorDoc(sub) {
				x.operators(sub)
			}
		case "$elemMatch":
			// Either a query on the elements' fields, or operators
			// on scalar elements.
			if isOperatorDoc(sub) {
				x.operators(sub)
			} else {
				x.filter(sub)
			}
		}
	}
}

// isOperatorDoc reports whether d's first key is an operator: MongoDB
// reads {$gt: 1} as a condition and {a: 1} as a value.
func isOperatorDoc(d bson.Raw) bool {
	e, err := d.IndexErr(0)
	return err == nil && strings.HasPrefix(e.Key(), "$")
}

// update records an update's operators: a document of operators, a
// replacement document (no operators: nothing to record), or a pipeline
// (an array of stages).
func (x *extractor) update(v bson.RawValue) {
	if arr, ok := v.ArrayOK(); ok {
		x.pipeline(bson.RawValue{Type: bson.TypeArray, Value: arr})
		return
	}
	d, ok := v.DocumentOK()
	if !ok {
		return
	}
	elems, _ := d.Elements()
	for _, e := range elems {
		op := e.Key()
		if !strings.HasPrefix(op, "$") {
			continue
		}
		x.add(KindUpdate, op)
		fields, ok := e.Value().DocumentOK()
		if !ok {
			continue
		}
		fes, _ := fields.Elements()
		for _, fe := range fes {
			x.positional(fe.Key())
			if mods, ok := fe.Value().DocumentOK(); ok && (op == "$push" || op == "$addToSet") && isOperatorDoc(mods) {
				mes, _ := mods.Elements()
				for _, me := range mes {
					x.add(KindUpdate, me.Key()) // $each, $position, $slice, $sort
				}
			}
		}
	}
}

// positional records the positional operators in an update's field path
// (a.$.b, a.$[].b, a.$[x].b), which Google's table lists as update
// operators.
func (x *extractor) positional(path string) {
	for _, part := range strings.Split(path, ".") {
		switch {
		case part == "$":
			x.add(KindUpdate, "$")
		case part == "$[]":
			x.add(KindUpdate, "$[]")
		case strings.HasPrefix(part, "$[") && strings.HasSuffix(part, "]"):
			x.add(KindUpdate, "$[<identifier>]")
		}
	}
}

// projection records a projection's operators, and whether it includes
// or excludes plain fields.
func (x *extractor) projection(d bson.Raw) {
	elems, _ := d.Elements()
	for _, e := range elems {
		if strings.HasSuffix(e.Key(), ".$") {
			x.add(KindProjection, "$")
			continue
		}
		v := e.Value()
		if sub, ok := v.DocumentOK(); ok {
			ses, _ := sub.Elements()
			for _, se := range ses {
				x.add(KindProjection, se.Key())
			}
			continue
		}
		include := true
		switch v.Type {
		case bson.TypeBoolean:
			include = v.Boolean()
		default:
			if n, ok := v.AsInt64OK(); ok {
				include = n != 0
			} else if f, ok := v.DoubleOK(); ok {
				include = f != 0
			}
		}
		if include {
			x.add(KindProjection, ProjectionInclude)
		} else {
			x.add(KindProjection, ProjectionExclude)
		}
	}
}

// pipeline records each stage, and what the stages that carry a filter
// ($match) or accumulators ($group) hold.
func (x *extractor) pipeline(v bson.RawValue) {
	for _, st := range documents(v) {
		first, err := st.IndexErr(0)
		if err != nil {
			continue
		}
		name := first.Key()
		x.add(KindStage, name)
		body, ok := first.Value().DocumentOK()
		if !ok {
			continue
		}
		switch name {
		case "$match":
			x.filter(body)
		case "$group":
			elems, _ := body.Elements()
			for _, e := range elems {
				if e.Key() == "_id" {
					continue
				}
				if acc, ok := e.Value().DocumentOK(); ok {
					if a, err := acc.IndexErr(0); err == nil {
						x.add(KindAccumulator, a.Key())
					}
				}
			}
		}
	}
}

// indexSpec records the fields of one index spec other than its key, and
// any index type that is not an ascending or descending field ("text",
// "2dsphere", "hashed", …) as "type <name>".
func (x *extractor) indexSpec(spec bson.Raw) {
	elems, _ := spec.Elements()
	for _, e := range elems {
		if e.Key() != "key" {
			x.add(KindIndexOption, e.Key())
			continue
		}
		key, ok := e.Value().DocumentOK()
		if !ok {
			continue
		}
		kes, _ := key.Elements()
		for _, ke := range kes {
			if s, ok := ke.Value().StringValueOK(); ok {
				x.add(KindIndexOption, "type "+s)
			}
		}
	}
}

// documents is the documents of an array value, skipping what is not a
// document: a shape records what a command holds, and a malformed element
// is the server's to refuse, not the extractor's.
func documents(v bson.RawValue) []bson.Raw {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil
	}
	vals, _ := arr.Values()
	out := make([]bson.Raw, 0, len(vals))
	for _, sv := range vals {
		if d, ok := sv.DocumentOK(); ok {
			out = append(out, bson.Raw(d))
		}
	}
	return out
}
