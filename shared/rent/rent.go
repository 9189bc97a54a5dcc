package rent

import (
	"encoding/json"
	"math/big"
)

// Directions of a calculation.
const (
	// ToMonthly converts a jeonse into a deposit plus monthly rent.
	ToMonthly = "toMonthly"
	// ToJeonse converts a deposit plus monthly rent back into a jeonse.
	ToJeonse = "toJeonse"
)

// RoundHalfAwayFromZero names the rounding rule in every Result.
const RoundHalfAwayFromZero = "nearest won, halves away from zero"

// Result is the answer, in whole won. Rates are JSON numbers rendered from
// their exact value.
type Result struct {
	Direction   string      `json:"direction"`
	Jeonse      int64       `json:"jeonse"`
	Deposit     int64       `json:"deposit"`
	MonthlyRent int64       `json:"monthlyRent"`
	Rate        json.Number `json:"rate"`
	// BaseRate, LegalMaxRate and ExceedsLegalMax are present only when a
	// base rate was given.
	BaseRate        *json.Number `json:"baseRate,omitempty"`
	LegalMaxRate    *json.Number `json:"legalMaxRate,omitempty"`
	ExceedsLegalMax *bool        `json:"exceedsLegalMax,omitempty"`
	Rounding        string       `json:"rounding"`
}

// Calculate converts in the direction the request asks for. It fails with a
// *FieldError (ErrRange) when the result does not fit in int64 won.
func Calculate(req Request) (Result, error) {
	res := Result{Deposit: req.Deposit, Rate: req.Rate.Number(), Rounding: RoundHalfAwayFromZero}
	rate := req.Rate.Rat()
	switch {
	case req.Jeonse != nil:
		res.Direction, res.Jeonse = ToMonthly, *req.Jeonse
		// (jeonse − deposit) × rate / 1200; jeonse ≥ deposit ≥ 0 was checked.
		gap := new(big.Int).Sub(big.NewInt(*req.Jeonse), big.NewInt(req.Deposit))
		num := new(big.Int).Mul(gap, rate.Num())
		den := new(big.Int).Mul(rate.Denom(), twelve100)
		m, ok := roundDiv(num, den)
		if !ok { // unreachable while rate ≤ 100: the rent is below the gap
			return Result{}, fieldErr(FieldJeonse, ErrRange, "the monthly rent does not fit in int64 won")
		}
		res.MonthlyRent = m
	case req.MonthlyRent != nil:
		if rate.Sign() <= 0 {
			return Result{}, fieldErr(FieldRate, ErrRange, "must be greater than 0")
		}
		res.Direction, res.MonthlyRent = ToJeonse, *req.MonthlyRent
		// deposit + monthlyRent × 1200 / rate, rounded once over the whole sum.
		num := new(big.Int).Mul(big.NewInt(*req.MonthlyRent), twelve100)
		num.Mul(num, rate.Denom())
		den := new(big.Int).Set(rate.Num())
		num.Add(num, new(big.Int).Mul(big.NewInt(req.Deposit), den))
		j, ok := roundDiv(num, den)
		if !ok {
			return Result{}, fieldErr(FieldMonthlyRent, ErrRange, "the jeonse it converts to is larger than the maximum %d won", int64(1<<63-1))
		}
		res.Jeonse = j
	default:
		return Result{}, fieldErr(FieldJeonse, ErrMissing, "is required (or give monthlyRent to convert back to a jeonse)")
	}
	if req.BaseRate != nil {
		max := LegalMaxRate(*req.BaseRate)
		b := req.BaseRate.Number()
		lm := json.Number(decimalString(max))
		exceeds := rate.Cmp(max) > 0
		res.BaseRate, res.LegalMaxRate, res.ExceedsLegalMax = &b, &lm, &exceeds
	}
	return res, nil
}

// LegalMaxRate is the ceiling on the conversion rate: the lower of 10% and
// the base rate + 2 points (Housing Lease Protection Act Enforcement Decree,
// Art. 9).
func LegalMaxRate(baseRate Rate) *big.Rat {
	r := new(big.Rat).Add(baseRate.Rat(), two)
	if r.Cmp(ten) > 0 {
		return new(big.Rat).Set(ten)
	}
	return r
}

// roundDiv returns num/den rounded to the nearest integer, halves away from
// zero, for num ≥ 0 and den > 0; ok is false when it does not fit in int64.
func roundDiv(num, den *big.Int) (int64, bool) {
	// floor((2·num + den) / (2·den)) rounds halves up, which is away from
	// zero for the non-negative values used here.
	n := new(big.Int).Lsh(num, 1)
	n.Add(n, den)
	d := new(big.Int).Lsh(den, 1)
	q := n.Quo(n, d)
	if q.Sign() < 0 || q.Cmp(maxInt64) > 0 {
		return 0, false
	}
	return q.Int64(), true
}
