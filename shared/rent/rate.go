package rent

import (
	"encoding/json"
	"math/big"
	"strings"
)

// maxFractionDigits bounds the digits after the decimal point of a rate.
// Rates are quoted to at most a few places; the bound keeps the rationals
// (and the work on hostile input) small.
const maxFractionDigits = 8

// maxRateDigits bounds the digits before the decimal point; with the range
// check below, 3 digits are enough for 100.
const maxRateDigits = 3

var (
	hundred   = big.NewRat(100, 1)
	ten       = big.NewRat(10, 1)
	two       = big.NewRat(2, 1)
	maxInt64  = big.NewInt(1<<63 - 1)
	twelve100 = big.NewInt(1200) // 12 months × 100 percent
)

// Rate is an annual rate in percent, held exactly.
type Rate struct {
	r *big.Rat
}

// ParseRate parses a plain decimal such as "4.5" or "10" (no sign, no
// exponent). field names the input in the error.
func ParseRate(field, s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Rate{}, fieldErr(field, ErrMissing, "is required")
	}
	if strings.HasPrefix(s, "-") {
		return Rate{}, fieldErr(field, ErrNegative, "must not be negative, got %s", clip(s))
	}
	intPart, frac, hasDot := strings.Cut(s, ".")
	if !digits(intPart) || (hasDot && !digits(frac)) {
		return Rate{}, fieldErr(field, ErrSyntax, "must be a plain decimal percentage such as 4.5, got %q", clip(s))
	}
	if len(strings.TrimLeft(intPart, "0")) > maxRateDigits || len(frac) > maxFractionDigits {
		return Rate{}, fieldErr(field, ErrRange, "must be between 0 and 100 with at most %d decimal places, got %s", maxFractionDigits, clip(s))
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return Rate{}, fieldErr(field, ErrSyntax, "must be a plain decimal percentage such as 4.5, got %q", clip(s))
	}
	if r.Cmp(hundred) > 0 {
		return Rate{}, fieldErr(field, ErrRange, "must be at most 100 (percent a year), got %s", clip(s))
	}
	return Rate{r: r}, nil
}

// IsZero reports whether the rate is unset or zero.
func (r Rate) IsZero() bool { return r.r == nil || r.r.Sign() == 0 }

// Rat returns a copy of the exact value.
func (r Rate) Rat() *big.Rat {
	if r.r == nil {
		return new(big.Rat)
	}
	return new(big.Rat).Set(r.r)
}

// Number renders the rate as a JSON number with no trailing zeros
// ("4.5", "10").
func (r Rate) Number() json.Number {
	return json.Number(decimalString(r.Rat()))
}

// String implements fmt.Stringer.
func (r Rate) String() string { return decimalString(r.Rat()) }

// decimalString renders a rational with a terminating decimal expansion of
// at most maxFractionDigits places (every rate here has one) without
// trailing zeros.
func decimalString(r *big.Rat) string {
	s := r.FloatString(maxFractionDigits)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	return s
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// clip keeps hostile input out of error messages at full length.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
