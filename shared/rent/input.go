package rent

import (
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// Field names, as JSON fields and query parameters.
const (
	FieldJeonse      = "jeonse"
	FieldDeposit     = "deposit"
	FieldMonthlyRent = "monthlyRent"
	FieldRate        = "rate"
	FieldBaseRate    = "baseRate"
)

// Input is the raw request, as decoded from a JSON body or a query string.
// Each field keeps its number's text (json.Number accepts both 4.5 and
// "4.5"), so rates never pass through float64. An empty field is absent.
type Input struct {
	Jeonse      json.Number `json:"jeonse,omitempty"`
	Deposit     json.Number `json:"deposit,omitempty"`
	MonthlyRent json.Number `json:"monthlyRent,omitempty"`
	Rate        json.Number `json:"rate,omitempty"`
	BaseRate    json.Number `json:"baseRate,omitempty"`
}

// FromQuery builds an Input from query parameters. Unknown and repeated
// parameters are refused, naming the parameter.
func FromQuery(q url.Values) (Input, error) {
	var in Input
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys) // deterministic: the first bad parameter by name
	for _, k := range keys {
		vs := q[k]
		if k == "" {
			return Input{}, fieldErr("query", ErrSyntax, "has a parameter with an empty name")
		}
		if len(vs) != 1 {
			return Input{}, fieldErr(k, ErrSyntax, "is given %d times; give it once", len(vs))
		}
		v := json.Number(strings.TrimSpace(vs[0]))
		switch k {
		case FieldJeonse:
			in.Jeonse = v
		case FieldDeposit:
			in.Deposit = v
		case FieldMonthlyRent:
			in.MonthlyRent = v
		case FieldRate:
			in.Rate = v
		case FieldBaseRate:
			in.BaseRate = v
		default:
			return Input{}, fieldErr(k, ErrUnknown, "is not a parameter of this calculator (jeonse, deposit, monthlyRent, rate, baseRate)")
		}
	}
	return in, nil
}

// Request is a validated calculation. Exactly one of Jeonse and MonthlyRent
// is set: Jeonse asks for the monthly rent, MonthlyRent for the jeonse.
type Request struct {
	Jeonse      *int64
	Deposit     int64
	MonthlyRent *int64
	Rate        Rate
	// BaseRate, when set, asks for the legal ceiling.
	BaseRate *Rate
}

// Parse validates the input: amounts are non-negative whole won that fit in
// int64, rate is a plain decimal in (0, 100], baseRate in [0, 100], exactly
// one of jeonse and monthlyRent is given, and the deposit is not above the
// jeonse. The error is a *FieldError naming the first field at fault.
func (in Input) Parse() (Request, error) {
	var req Request
	var err error
	if req.Jeonse, err = parseAmount(FieldJeonse, in.Jeonse); err != nil {
		return Request{}, err
	}
	if req.MonthlyRent, err = parseAmount(FieldMonthlyRent, in.MonthlyRent); err != nil {
		return Request{}, err
	}
	dep, err := parseAmount(FieldDeposit, in.Deposit)
	if err != nil {
		return Request{}, err
	}
	if dep != nil {
		req.Deposit = *dep
	}
	if req.Rate, err = ParseRate(FieldRate, string(in.Rate)); err != nil {
		return Request{}, err
	}
	if req.Rate.IsZero() {
		return Request{}, fieldErr(FieldRate, ErrRange, "must be greater than 0")
	}
	if in.BaseRate != "" {
		b, err := ParseRate(FieldBaseRate, string(in.BaseRate))
		if err != nil {
			return Request{}, err
		}
		req.BaseRate = &b
	}
	switch {
	case req.Jeonse == nil && req.MonthlyRent == nil:
		return Request{}, fieldErr(FieldJeonse, ErrMissing, "is required (or give monthlyRent to convert back to a jeonse)")
	case req.Jeonse != nil && req.MonthlyRent != nil:
		return Request{}, fieldErr(FieldMonthlyRent, ErrConflict, "give either jeonse (to get the monthly rent) or monthlyRent (to get the jeonse), not both")
	case req.Jeonse != nil && req.Deposit > *req.Jeonse:
		return Request{}, fieldErr(FieldDeposit, ErrConflict, "%d is above the jeonse %d", req.Deposit, *req.Jeonse)
	}
	return req, nil
}

// parseAmount parses whole won. Absent (empty) gives nil.
func parseAmount(field string, n json.Number) (*int64, error) {
	s := strings.TrimSpace(string(n))
	if s == "" {
		return nil, nil
	}
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimPrefix(s, "-")
	if !digits(body) {
		return nil, fieldErr(field, ErrSyntax, "must be a whole number of won such as 300000000, got %q", clip(s))
	}
	if neg && strings.Trim(body, "0") != "" {
		return nil, fieldErr(field, ErrNegative, "must not be negative, got %s", clip(s))
	}
	v, err := strconv.ParseInt(body, 10, 64)
	if err != nil {
		return nil, fieldErr(field, ErrRange, "is larger than the maximum %d won", int64(1<<63-1))
	}
	return &v, nil
}
