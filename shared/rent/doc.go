// Package rent converts a Korean jeonse deposit to a deposit plus monthly
// rent (월세 전환) and back, and reports the legal ceiling on the conversion
// rate.
//
// # Formula
//
// Forward (jeonse → monthly rent):
//
//	monthlyRent = (jeonse − deposit) × rate / 100 / 12
//
// Reverse (deposit + monthly rent → jeonse):
//
//	jeonse = deposit + monthlyRent × 12 × 100 / rate
//
// rate is the annual conversion rate in percent (4.5 means 4.5% a year).
//
// # Exact arithmetic and rounding
//
// Amounts are whole won (int64). Rates are parsed from their decimal text
// into exact rationals (math/big.Rat), never through float64, so 4.5% is
// exactly 45/1000 and no binary-fraction error can move a result by one won.
// Each result is computed exactly and then rounded once, to the nearest whole
// won, with halves rounded away from zero (RoundHalfAwayFromZero; every
// amount is non-negative, so this is also "half up"). A result that does not
// fit in int64 is refused, never wrapped.
//
// # Legal ceiling
//
// The Housing Lease Protection Act Enforcement Decree, Art. 9, caps the rate
// used to convert a deposit into monthly rent at the lower of 10% a year and
// the Bank of Korea base rate plus 2 percentage points. Given baseRate, the
// result carries legalMaxRate and exceedsLegalMax.
package rent
