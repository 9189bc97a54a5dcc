package rent_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/big"
	"net/url"
	"testing"

	"github.com/baton-cron/baton/shared/rent"
)

// FuzzDecode drives both decoders (query string and strict JSON body) and
// the calculation with arbitrary input. It checks that nothing panics, that
// every refusal is a *rent.FieldError naming a field, and that every answer
// is the exactly rounded formula.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"jeonse=300000000&deposit=100000000&rate=4.5",
		"jeonse=-1&rate=4",
		"monthlyRent=750000&deposit=100000000&rate=4.5&baseRate=2.5",
		"jeonse=9223372036854775807&rate=100",
		"monthlyRent=9223372036854775807&rate=0.00000001",
		`{"jeonse":300000000,"deposit":100000000,"rate":4.5}`,
		`{"jeonse":"300000000","rate":"4.5","baseRate":9}`,
		`{"monthlyRent":1,"rate":1e2}`,
		`{"jeonse":1,"rate":4,"x":1}`,
		"rate=%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if q, err := url.ParseQuery(s); err == nil {
			if in, err := rent.FromQuery(q); err == nil {
				check(t, in)
			} else {
				mustFieldError(t, err)
			}
		}
		var in rent.Input
		dec := json.NewDecoder(bytes.NewReader([]byte(s)))
		dec.DisallowUnknownFields()
		if dec.Decode(&in) == nil {
			check(t, in)
		}
	})
}

func mustFieldError(t *testing.T, err error) {
	t.Helper()
	var fe *rent.FieldError
	if !errors.As(err, &fe) || fe.Field == "" || fe.Err == nil {
		t.Fatalf("error %v (%T) is not a *rent.FieldError naming a field", err, err)
	}
}

func check(t *testing.T, in rent.Input) {
	t.Helper()
	req, err := in.Parse()
	if err != nil {
		mustFieldError(t, err)
		return
	}
	res, err := rent.Calculate(req)
	if err != nil {
		mustFieldError(t, err)
		return
	}
	if res.Jeonse < 0 || res.Deposit < 0 || res.MonthlyRent < 0 {
		t.Fatalf("negative amount in %+v", res)
	}
	rate := req.Rate.Rat()
	// exact = the unrounded answer; the rounded one is within half a won.
	var exact *big.Rat
	var got int64
	switch res.Direction {
	case rent.ToMonthly:
		exact = new(big.Rat).SetInt64(res.Jeonse - res.Deposit)
		exact.Mul(exact, rate).Quo(exact, big.NewRat(1200, 1))
		got = res.MonthlyRent
	case rent.ToJeonse:
		exact = new(big.Rat).SetInt64(res.MonthlyRent)
		exact.Mul(exact, big.NewRat(1200, 1)).Quo(exact, rate).Add(exact, new(big.Rat).SetInt64(res.Deposit))
		got = res.Jeonse
	default:
		t.Fatalf("direction %q", res.Direction)
	}
	d := new(big.Rat).Sub(new(big.Rat).SetInt64(got), exact)
	if d.Abs(d).Cmp(big.NewRat(1, 2)) > 0 {
		t.Fatalf("%+v: %d is more than half a won from %s", in, got, exact.FloatString(3))
	}
	if _, err := json.Marshal(res); err != nil {
		t.Fatalf("result does not encode: %v", err)
	}
}
