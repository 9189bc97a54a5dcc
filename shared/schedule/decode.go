package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/baton-cron/baton/shared/httpapi"
)

// MaxScheduleBytes bounds a schedule document read by DecodeSchedule.
const MaxScheduleBytes = 1 << 20

// DecodeSchedule strictly decodes one JSON schedule object. It refuses, with
// a *FieldError whose Field is the dotted JSON path ("target.http.method"):
//
//   - unknown fields, including a known name in the wrong case ("Cron"),
//     which encoding/json alone would accept;
//   - a field given twice in one object;
//   - a value of the wrong type, and a duration that does not parse;
//   - anything after the object, and an empty or malformed body (Field "").
//
// A body over MaxScheduleBytes yields an *http.MaxBytesError, as does an
// http.MaxBytesReader passed as r, so the API can answer 413. Enabled defaults
// to true when absent. Server-managed fields (nextRunAt, version, createdAt,
// updatedAt, misfire) are decoded as given; the caller overwrites them.
// DecodeSchedule does not validate values: call Normalize.
func DecodeSchedule(r io.Reader) (*Schedule, error) {
	s := &Schedule{Enabled: true}
	if err := decodeStrict(r, "schedule", MaxScheduleBytes, s); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeStrict decodes one JSON object of at most limit bytes from r into
// out (a pointer to a struct, already holding its defaults), strictly: an
// unknown field, a wrong type, or anything after the object is a
// *FieldError naming it. A body over limit is an *http.MaxBytesError.
func decodeStrict[T any](r io.Reader, what string, limit int, out *T) error {
	body, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
	if err != nil {
		return fmt.Errorf("decode %s: read body: %w", what, err)
	}
	if len(body) > limit {
		return &http.MaxBytesError{Limit: int64(limit)}
	}
	// First pass: walk the tokens against the Go type, to name the field of
	// any problem exactly. Second pass: let encoding/json fill the struct.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return jsonFieldError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return typeError("", "a JSON object", tok)
	}
	if err := walkJSON(dec, tok, reflect.TypeFor[T](), ""); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &FieldError{Reason: "body must hold exactly one JSON object and nothing after it"}
	}
	if err := json.Unmarshal(body, out); err != nil {
		return jsonFieldError(err)
	}
	return nil
}

var (
	durationType = reflect.TypeFor[Duration]()
	timeType     = reflect.TypeFor[time.Time]()
)

// walkJSON checks the value that starts with tok against t. It descends only
// into known fields, so its depth is bounded by the Go type, not the input.
func walkJSON(dec *json.Decoder, tok json.Token, t reflect.Type, path string) error {
	if tok == nil { // null leaves the zero value, as encoding/json does
		return nil
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
	case durationType:
		s, ok := tok.(string)
		if !ok {
			return typeError(path, "a duration string such as \"90s\" or \"5m\"", tok)
		}
		if _, err := time.ParseDuration(s); err != nil {
			return &FieldError{Field: path, Reason: httpapi.Sprintf("invalid duration %q; want a Go duration such as \"90s\", \"5m\" or \"1h30m\"", s)}
		}
		return nil
	case timeType:
		s, ok := tok.(string)
		if !ok {
			return typeError(path, "an RFC 3339 time string", tok)
		}
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return &FieldError{Field: path, Reason: httpapi.Sprintf("invalid time %q; want RFC 3339 such as \"2026-03-29T01:30:00Z\"", s)}
		}
		return nil
	}
	switch t.Kind() {
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return typeError(path, "a string", tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return typeError(path, "true or false", tok)
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := tok.(json.Number)
		if !ok {
			return typeError(path, "an integer", tok)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return &FieldError{Field: path, Reason: fmt.Sprintf("must be an integer that fits in %d bits, not %s", t.Bits(), httpapi.Cut(string(n)))}
		}
	case reflect.Slice:
		return walkArray(dec, tok, t.Elem(), path)
	case reflect.Map:
		return walkObject(dec, tok, path, func(key string) (reflect.Type, error) { return t.Elem(), nil })
	case reflect.Struct:
		fields := jsonFields(t)
		return walkObject(dec, tok, path, func(key string) (reflect.Type, error) {
			if ft, ok := fields[key]; ok {
				return ft, nil
			}
			for name := range fields {
				if strings.EqualFold(name, key) {
					return nil, &FieldError{Field: join(path, key), Reason: httpapi.Sprintf("unknown field; did you mean %q? (names are case-sensitive)", name)}
				}
			}
			return nil, &FieldError{Field: join(path, key), Reason: "unknown field"}
		})
	default:
		return &FieldError{Field: path, Reason: fmt.Sprintf("cannot decode into %s", t)}
	}
	return nil
}

// walkObject checks an object's keys with typeOf and its values with
// walkJSON, refusing duplicate keys.
func walkObject(dec *json.Decoder, tok json.Token, path string, typeOf func(string) (reflect.Type, error)) error {
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return typeError(path, "an object", tok)
	}
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return inside(err)
		}
		key, ok := kt.(string)
		if !ok { // cannot happen: the decoder only yields string keys
			return &FieldError{Field: path, Reason: "object key is not a string"}
		}
		field := join(path, key)
		if seen[key] {
			return &FieldError{Field: field, Reason: "appears more than once"}
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
		if err := walkJSON(dec, vt, ft, field); err != nil {
			return err
		}
	}
	if end, err := dec.Token(); err != nil { // the closing '}'
		return inside(err)
	} else if d, ok := end.(json.Delim); !ok || d != '}' {
		return &FieldError{Field: path, Reason: "object is not closed"}
	}
	return nil
}

// walkArray checks an array's elements against elem, naming a bad one by
// its index ("notify.on[1]").
func walkArray(dec *json.Decoder, tok json.Token, elem reflect.Type, path string) error {
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return typeError(path, "an array", tok)
	}
	for i := 0; dec.More(); i++ {
		vt, err := dec.Token()
		if err != nil {
			return inside(err)
		}
		if err := walkJSON(dec, vt, elem, fmt.Sprintf("%s[%d]", path, i)); err != nil {
			return err
		}
	}
	if end, err := dec.Token(); err != nil { // the closing ']'
		return inside(err)
	} else if d, ok := end.(json.Delim); !ok || d != ']' {
		return &FieldError{Field: path, Reason: "array is not closed"}
	}
	return nil
}

// inside maps a token error met inside an object: there, the end of input
// means a truncated body, not an empty one.
func inside(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return jsonFieldError(err)
}

// jsonFields maps the JSON names of t's fields to their types. Fields tagged
// "-" are not settable from JSON and so are unknown.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

// join names key inside path: dotted for a plain key, bracketed and cut
// for any other (httpapi.FieldPath), so a huge or dotted key cannot make a
// huge or misleading field name.
func join(path, key string) string { return httpapi.FieldPath(path, key) }

func typeError(path, want string, tok json.Token) *FieldError {
	got := "null"
	switch v := tok.(type) {
	case json.Delim:
		got = map[json.Delim]string{'{': "an object", '[': "an array"}[v]
	case string:
		got = "a string"
	case bool:
		got = "a boolean"
	case json.Number:
		got = "a number"
	}
	return &FieldError{Field: path, Reason: fmt.Sprintf("must be %s, not %s", want, got)}
}

func jsonFieldError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		return &FieldError{Field: typeErr.Field, Reason: fmt.Sprintf("must be %s, not %s", typeErr.Type, httpapi.Cut(typeErr.Value))}
	case errors.As(err, &syntaxErr):
		return &FieldError{Reason: fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)}
	case errors.Is(err, io.EOF):
		return &FieldError{Reason: "body is empty; a JSON object is required"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &FieldError{Reason: "body ends in the middle of the JSON object"}
	default:
		return &FieldError{Reason: fmt.Sprintf("malformed JSON: %v", err)}
	}
}
