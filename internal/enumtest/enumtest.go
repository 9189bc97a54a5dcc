package enumtest

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Check checks the enum type named typeName, declared in the non-test Go
// files of dir (the package under test: "."), against its list all and its
// method valid:
//
//   - the constants of the type in dir are exactly the values of all, each
//     once; a constant declared in the same const group as the type's
//     constants must be of the type too (an untyped one would slip past
//     the list);
//   - valid accepts every value of all, and refuses the empty string, each
//     value in upper case, padded or extended, and every value of unknown;
//   - JSON and BSON (as a bson.D value, in a bson.A, and as a struct field)
//     encode each value as its plain string does, and decode it back.
func Check[T ~string](t *testing.T, dir, typeName string, all []T, valid func(T) bool, unknown ...T) {
	t.Helper()
	consts := Constants(t, dir, typeName)
	listed := map[T]int{}
	for _, v := range all {
		listed[v]++
	}
	for v, n := range listed {
		if n > 1 {
			t.Errorf("the list of %s holds %q %d times", typeName, v, n)
		}
	}
	want := slices.Sorted(func(yield func(string) bool) {
		for _, v := range consts {
			if !yield(v) {
				return
			}
		}
	})
	got := make([]string, 0, len(all))
	for _, v := range all {
		got = append(got, string(v))
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the list of %s against its constants in %s (-constants,+list):\n%s", typeName, dir, diff)
	}
	for _, v := range all {
		if !valid(v) {
			t.Errorf("%s(%q).Valid() = false for a listed value", typeName, v)
		}
		checkWire(t, typeName, v)
	}
	bad := append([]T{""}, unknown...)
	for _, v := range all {
		if up := T(strings.ToUpper(string(v))); up != v {
			bad = append(bad, up)
		}
		bad = append(bad, " "+v, v+" ", v+"x", v[:len(v)-1])
	}
	for _, v := range bad {
		if listed[v] == 0 && valid(v) {
			t.Errorf("%s(%q).Valid() = true for a value not in the list", typeName, v)
		}
	}
}

// checkWire checks that v encodes and decodes as string(v) does.
func checkWire[T ~string](t *testing.T, typeName string, v T) {
	t.Helper()
	s := string(v)
	same := func(what string, a, b []byte, errA, errB error) {
		t.Helper()
		if errA != nil || errB != nil {
			t.Errorf("%s %q: %v, %v", what, v, errA, errB)
		} else if !bytes.Equal(a, b) {
			t.Errorf("%s of %s %q = %q, want the plain string's %q", what, typeName, v, a, b)
		}
	}
	jt, errT := json.Marshal(v)
	js, errS := json.Marshal(s)
	same("JSON", jt, js, errT, errS)
	var back T
	if err := json.Unmarshal(js, &back); err != nil || back != v {
		t.Errorf("JSON %s back into %s = %q, %v; want %q", js, typeName, back, err, v)
	}
	// A filter: the value in a bson.D and in a bson.A ($in), as the domain
	// packages build their queries.
	bt, errT := bson.Marshal(bson.D{{Key: "status", Value: v}, {Key: "in", Value: bson.A{v}}})
	bs, errS := bson.Marshal(bson.D{{Key: "status", Value: s}, {Key: "in", Value: bson.A{s}}})
	same("BSON filter", bt, bs, errT, errS)
	// A document: the value as a struct field, as the models store it.
	bt, errT = bson.Marshal(struct {
		V T `bson:"v"`
	}{v})
	bs, errS = bson.Marshal(bson.D{{Key: "v", Value: s}})
	same("BSON field", bt, bs, errT, errS)
	var doc struct {
		V T `bson:"v"`
	}
	if err := bson.Unmarshal(bs, &doc); err != nil || doc.V != v {
		t.Errorf("BSON {v: %q} back into %s = %q, %v; want %q", s, typeName, doc.V, err, v)
	}
}

// Constants returns the constants of the type named typeName declared in
// the non-test Go files of dir, by name, with their string values. A
// constant of the type whose value is not a string literal, and an untyped
// or otherwise typed constant in a const group of the type, fail t: the
// list they would be checked against could not be trusted.
func Constants(t *testing.T, dir, typeName string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			groupConsts(t, fset, g, typeName, out)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no constants of type %s in %s", typeName, dir)
	}
	return out
}

// groupConsts adds the constants of typeName in the const group g to out.
func groupConsts(t *testing.T, fset *token.FileSet, g *ast.GenDecl, typeName string, out map[string]string) {
	t.Helper()
	type one struct {
		name, typ string
		value     ast.Expr
		pos       token.Pos
	}
	var all []one
	typ := ""
	for _, sp := range g.Specs {
		vs := sp.(*ast.ValueSpec)
		switch {
		case vs.Type != nil:
			typ = typeString(vs.Type)
		case len(vs.Values) > 0:
			typ = "" // untyped, unless a conversion says otherwise (below)
		}
		for i, n := range vs.Names {
			var val ast.Expr
			if i < len(vs.Values) {
				val = vs.Values[i]
			}
			ct := typ
			if vs.Type == nil {
				if call, ok := val.(*ast.CallExpr); ok && len(call.Args) == 1 && typeString(call.Fun) == typeName {
					ct, val = typeName, call.Args[0] // X = T("x")
				}
			}
			all = append(all, one{n.Name, ct, val, n.Pos()})
		}
	}
	if !slices.ContainsFunc(all, func(c one) bool { return c.typ == typeName }) {
		return
	}
	for _, c := range all {
		if c.name == "_" {
			continue
		}
		if c.typ != typeName {
			t.Errorf("%s: constant %s sits among the %s constants but is not of that type", fset.Position(c.pos), c.name, typeName)
			continue
		}
		lit, ok := c.value.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			t.Errorf("%s: constant %s of type %s is not a string literal; enumtest cannot read its value", fset.Position(c.pos), c.name, typeName)
			continue
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		out[c.name] = v
	}
}

// typeString names a type expression as written: "Overlap", "schedule.Overlap".
func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	}
	return ""
}
