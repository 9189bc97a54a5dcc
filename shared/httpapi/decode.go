package httpapi

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// MaxBodyBytes is the default request-body limit. Schedules and job payloads
// are small; anything larger is a mistake or an attack.
const MaxBodyBytes = 1 << 20

// MaxDepth bounds how deeply a request body may nest objects and arrays.
// Every body baton reads is a few levels deep; the bound keeps the strict
// check's recursion small for a body of a million '['.
const MaxDepth = 32

// DecodeJSON reads one JSON object from r's body into dst with Unmarshal's
// strict rules, and refuses bodies over limit (MaxBodyBytes when limit ≤ 0)
// with a 413. Errors are *Error values naming the field where one is at
// fault.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	if limit <= 0 {
		limit = MaxBodyBytes
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return TooLarge(limit)
		}
		return BadRequest("", "reading the body: %v", err)
	}
	return Unmarshal(body, dst)
}

// Unmarshal decodes data, which must hold exactly one JSON value, into dst,
// more strictly than encoding/json. It refuses, with a 400 *Error naming the
// field:
//
//   - a key given twice in one object, at any depth (encoding/json keeps
//     the last, so what was checked and what is used could differ);
//   - a struct field named in another case than its json tag ("Cron" for
//     "cron"; encoding/json matches names case-insensitively);
//   - unknown fields, a wrong JSON type, malformed JSON, nesting deeper than
//     MaxDepth, and anything after the value.
//
// Inside values of types with their own UnmarshalJSON, and inside maps and
// interface values, only duplicate keys and depth are checked. A number
// decoded into an interface value is a json.Number, so that integers keep
// their precision.
func Unmarshal(data []byte, dst any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return decodeError(err)
	}
	if err := walk(dec, tok, reflect.TypeOf(dst), "", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest("", "body must hold exactly one JSON object and nothing after it")
	}
	// The walk found the input well-formed and every name exact; let
	// encoding/json fill dst and report wrong types.
	dec = json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	return nil
}

var (
	jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// walk checks the value that starts with tok. t is the Go type it decodes
// into, or nil where names are not checked (inside a type's own
// UnmarshalJSON, an interface value, or a value of the wrong type, which
// encoding/json reports afterwards).
func walk(dec *json.Decoder, tok json.Token, t reflect.Type, path string, depth int) error {
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // a scalar
	}
	if depth >= MaxDepth {
		return BadRequest(path, "nests objects and arrays deeper than %d levels", MaxDepth)
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (reflect.PointerTo(t).Implements(jsonUnmarshaler) || reflect.PointerTo(t).Implements(textUnmarshaler)) {
		t = nil
	}
	if d == '[' {
		var elem reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			elem = t.Elem()
		}
		for dec.More() {
			vt, err := dec.Token()
			if err != nil {
				return inside(err)
			}
			if err := walk(dec, vt, elem, path, depth+1); err != nil {
				return err
			}
		}
		_, err := dec.Token() // the closing ']'
		return inside(err)
	}
	var typeOf func(key string) (reflect.Type, error)
	switch {
	case t != nil && t.Kind() == reflect.Struct:
		fields := jsonFields(t)
		typeOf = func(key string) (reflect.Type, error) {
			if ft, ok := fields[key]; ok {
				return ft, nil
			}
			for name := range fields {
				if strings.EqualFold(name, key) {
					return nil, BadRequest(FieldPath(path, key), "unknown field; did you mean %q? (names are case-sensitive)", name)
				}
			}
			return nil, BadRequest(FieldPath(path, key), "unknown field")
		}
	case t != nil && t.Kind() == reflect.Map:
		typeOf = func(string) (reflect.Type, error) { return t.Elem(), nil }
	default:
		typeOf = func(string) (reflect.Type, error) { return nil, nil }
	}
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return inside(err)
		}
		key, _ := kt.(string) // the decoder yields only string keys
		field := FieldPath(path, key)
		if seen[key] {
			return BadRequest(field, "appears more than once in one object")
		}
		seen[key] = true
		ft, err := typeOf(key)
		if err != nil {
			return err
		}
		vt, err := dec.Token()
		if err != nil {
			return inside(err)
		}
		if err := walk(dec, vt, ft, field, depth+1); err != nil {
			return err
		}
	}
	_, err := dec.Token() // the closing '}'
	return inside(err)
}

// inside maps a token error met inside a value: there, the end of input
// means a truncated body, not an empty one.
func inside(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, io.EOF) {
		return BadRequest("", "body ends in the middle of the JSON value")
	}
	return decodeError(err)
}

// jsonFields maps the JSON names of t's fields to their types, as
// encoding/json sees them: fields of embedded structs without a name of
// their own are promoted, and fields tagged "-" are absent.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			for k, v := range jsonFields(ft) {
				if _, ok := m[k]; !ok { // the outer field wins
					m[k] = v
				}
			}
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

func decodeError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		// Say what JSON is wanted, not the Go type (an internal name
		// such as "gpu.EnqueueRequest"). Value can hold the input
		// ("number 1e999…"), so it is cut.
		if typeErr.Field == "" {
			return BadRequest("", "body must be %s, not %s", jsonKind(typeErr.Type), Cut(typeErr.Value))
		}
		return BadRequest(typeErr.Field, "must be %s, not %s", jsonKind(typeErr.Type), Cut(typeErr.Value))
	case errors.As(err, &syntaxErr):
		return BadRequest("", "malformed JSON at byte %d: %s", syntaxErr.Offset, Cut(err.Error()))
	case errors.Is(err, io.EOF):
		return BadRequest("", "body is empty; a JSON object is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("", "body ends in the middle of the JSON value")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return BadRequest(cutTo(field, MaxFieldBytes), "unknown field")
	default:
		var he *Error
		if errors.As(err, &he) {
			return he
		}
		return BadRequest("", "malformed JSON: %s", Cut(err.Error()))
	}
}

// jsonKind names the JSON a Go type decodes from.
func jsonKind(t reflect.Type) string {
	if t == nil {
		return "a JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "a JSON value"
}

// KnownParams refuses the first (in name order) query parameter of q not
// among names, with a 400 naming it and listing names: a misspelt filter
// (scheduleId for schedule) would otherwise be ignored, and a list answer
// everything as if it were filtered.
func KnownParams(q url.Values, names []string) error {
	var unknown []string
	for k := range q {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return BadRequest(unknown[0], "unknown query parameter; this takes %s", strings.Join(names, ", "))
}
