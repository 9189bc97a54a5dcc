package schedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// MaxScheduleBytes bounds a schedule document read by DecodeSchedule.
const MaxScheduleBytes = 1 << 20

// DecodeSchedule strictly decodes one JSON schedule: unknown fields, a
// second value after the object, and values of the wrong type are refused
// with a *FieldError naming the field. A body over MaxScheduleBytes yields an
// *http.MaxBytesError (also when r is an http.MaxBytesReader that trips), so
// the API can answer 413. Enabled defaults to true when absent. Server-managed
// fields (nextRunAt, version, createdAt, updatedAt, misfire) are decoded as
// given; the caller overwrites them.
func DecodeSchedule(r io.Reader) (*Schedule, error) {
	body, err := io.ReadAll(io.LimitReader(r, MaxScheduleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("decode schedule: read body: %w", err)
	}
	if len(body) > MaxScheduleBytes {
		return nil, &http.MaxBytesError{Limit: MaxScheduleBytes}
	}
	s := &Schedule{Enabled: true}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(s); err != nil {
		return nil, jsonFieldError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &FieldError{Reason: "body must hold exactly one JSON object"}
	}
	return s, nil
}

func jsonFieldError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		return &FieldError{Field: typeErr.Field, Reason: fmt.Sprintf("must be %s, not %s", typeErr.Type, typeErr.Value)}
	case errors.As(err, &syntaxErr):
		return &FieldError{Reason: fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err)}
	case errors.Is(err, io.EOF):
		return &FieldError{Reason: "body is empty; a JSON object is required"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return &FieldError{Field: strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), Reason: "unknown field"}
	default:
		return &FieldError{Reason: fmt.Sprintf("malformed JSON: %v", err)}
	}
}
