package httpapi

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
)

// MaxBodyBytes is the default request-body limit. Schedules and job payloads
// are small; anything larger is a mistake or an attack.
const MaxBodyBytes = 1 << 20

// DecodeJSON reads one JSON object from r's body into dst. It refuses unknown
// fields, trailing data and bodies over limit (MaxBodyBytes when limit ≤ 0),
// and returns an *Error that names the field where the decoder can tell.
func DecodeJSON(w http.ResponseWriter, r *http.Request, limit int64, dst any) error {
	if limit <= 0 {
		limit = MaxBodyBytes
	}
	body := http.MaxBytesReader(w, r.Body, limit)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err, limit)
	}
	// Decode the rest as raw JSON: decoding it into a struct would apply
	// DisallowUnknownFields and misreport trailing data as an unknown field.
	var rest json.RawMessage
	if err := dec.Decode(&rest); !errors.Is(err, io.EOF) {
		if err == nil {
			return BadRequest("", "body must hold exactly one JSON object")
		}
		return decodeError(err, limit)
	}
	return nil
}

func decodeError(err error, limit int64) error {
	var (
		maxErr    *http.MaxBytesError
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &maxErr):
		return TooLarge(limit)
	case errors.As(err, &typeErr):
		// Say what JSON is wanted, not the Go type (an internal name
		// such as "gpu.EnqueueRequest").
		if typeErr.Field == "" {
			return BadRequest("", "body must be %s, not %s", jsonKind(typeErr.Type), typeErr.Value)
		}
		return BadRequest(typeErr.Field, "must be %s, not %s", jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &syntaxErr):
		return BadRequest("", "malformed JSON at byte %d: %v", syntaxErr.Offset, err)
	case errors.Is(err, io.EOF):
		return BadRequest("", "body is empty; a JSON object is required")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return BadRequest(field, "unknown field")
	default:
		var he *Error
		if errors.As(err, &he) {
			return he
		}
		return BadRequest("", "malformed JSON: %v", err)
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
