package rent_test

import (
	"encoding/json"
	"errors"
	"math/big"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-cron/baton/shared/rent"
)

func num(s string) *json.Number { n := json.Number(s); return &n }
func boolp(b bool) *bool        { return &b }

func calc(t *testing.T, in rent.Input) (rent.Result, error) {
	t.Helper()
	req, err := in.Parse()
	if err != nil {
		return rent.Result{}, err
	}
	return rent.Calculate(req)
}

func TestCalculate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   rent.Input
		want rent.Result
	}{
		{
			name: "issue example",
			in:   rent.Input{Jeonse: "300000000", Deposit: "100000000", Rate: "4.5"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 300000000, Deposit: 100000000, MonthlyRent: 750000, Rate: "4.5"},
		},
		{
			name: "no deposit means zero",
			in:   rent.Input{Jeonse: "120000000", Rate: "6"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 120000000, MonthlyRent: 600000, Rate: "6"},
		},
		{
			name: "deposit equal to jeonse gives no rent",
			in:   rent.Input{Jeonse: "5", Deposit: "5", Rate: "4"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 5, Deposit: 5, MonthlyRent: 0, Rate: "4"},
		},
		{
			// 100 × 6% / 12 = 0.5 exactly: half rounds away from zero.
			name: "half rounds up",
			in:   rent.Input{Jeonse: "100", Rate: "6"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 100, MonthlyRent: 1, Rate: "6"},
		},
		{
			// 99 × 6% / 12 = 0.495: below half rounds down.
			name: "below half rounds down",
			in:   rent.Input{Jeonse: "99", Rate: "6"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 99, MonthlyRent: 0, Rate: "6"},
		},
		{
			// 0.1 has no exact float64; parsed as 1/10 the answer is the
			// exact 83,333.33… rounded once.
			name: "decimal rate is exact",
			in:   rent.Input{Jeonse: "1000000000", Rate: "0.1"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 1000000000, MonthlyRent: 83333, Rate: "0.1"},
		},
		{
			name: "reverse of the issue example",
			in:   rent.Input{Deposit: "100000000", MonthlyRent: "750000", Rate: "4.5"},
			want: rent.Result{Direction: rent.ToJeonse, Jeonse: 300000000, Deposit: 100000000, MonthlyRent: 750000, Rate: "4.5"},
		},
		{
			// 1 × 1200 / 7 = 171.428…
			name: "reverse rounds once over the sum",
			in:   rent.Input{Deposit: "10", MonthlyRent: "1", Rate: "7"},
			want: rent.Result{Direction: rent.ToJeonse, Jeonse: 181, Deposit: 10, MonthlyRent: 1, Rate: "7"},
		},
		{
			name: "base rate under the cap",
			in:   rent.Input{Jeonse: "300000000", Deposit: "100000000", Rate: "4.5", BaseRate: "2.5"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 300000000, Deposit: 100000000, MonthlyRent: 750000, Rate: "4.5",
				BaseRate: num("2.5"), LegalMaxRate: num("4.5"), ExceedsLegalMax: boolp(false)},
		},
		{
			name: "rate above base + 2",
			in:   rent.Input{Jeonse: "300000000", Deposit: "100000000", Rate: "4.51", BaseRate: "2.5"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 300000000, Deposit: 100000000, MonthlyRent: 751667, Rate: "4.51",
				BaseRate: num("2.5"), LegalMaxRate: num("4.5"), ExceedsLegalMax: boolp(true)},
		},
		{
			name: "ceiling is 10 when base + 2 is higher",
			in:   rent.Input{Jeonse: "1200", Rate: "10.5", BaseRate: "9.25"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 1200, MonthlyRent: 11, Rate: "10.5",
				BaseRate: num("9.25"), LegalMaxRate: num("10"), ExceedsLegalMax: boolp(true)},
		},
		{
			name: "max int64 jeonse at 100%",
			in:   rent.Input{Jeonse: "9223372036854775807", Rate: "100"},
			want: rent.Result{Direction: rent.ToMonthly, Jeonse: 9223372036854775807, MonthlyRent: 768614336404564651, Rate: "100"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := calc(t, tt.in)
			if err != nil {
				t.Fatalf("Calculate(%+v): %v", tt.in, err)
			}
			tt.want.Rounding = rent.RoundHalfAwayFromZero
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Calculate(%+v) (-want,+got):\n%s", tt.in, diff)
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		in        rent.Input
		field     string
		reason    error
		inMessage string
	}{
		{"negative jeonse", rent.Input{Jeonse: "-1", Rate: "4"}, "jeonse", rent.ErrNegative, "negative"},
		{"negative deposit", rent.Input{Jeonse: "1", Deposit: "-5", Rate: "4"}, "deposit", rent.ErrNegative, "negative"},
		{"negative monthly", rent.Input{MonthlyRent: "-5", Rate: "4"}, "monthlyRent", rent.ErrNegative, "negative"},
		{"negative rate", rent.Input{Jeonse: "1", Rate: "-4"}, "rate", rent.ErrNegative, "negative"},
		{"negative base rate", rent.Input{Jeonse: "1", Rate: "4", BaseRate: "-0.5"}, "baseRate", rent.ErrNegative, "negative"},
		{"deposit above jeonse", rent.Input{Jeonse: "100", Deposit: "101", Rate: "4"}, "deposit", rent.ErrConflict, "above the jeonse"},
		{"missing rate", rent.Input{Jeonse: "100"}, "rate", rent.ErrMissing, "required"},
		{"zero rate", rent.Input{Jeonse: "100", Rate: "0"}, "rate", rent.ErrRange, "greater than 0"},
		{"rate over 100", rent.Input{Jeonse: "100", Rate: "100.01"}, "rate", rent.ErrRange, "at most 100"},
		{"rate with exponent", rent.Input{Jeonse: "100", Rate: "4e0"}, "rate", rent.ErrSyntax, "plain decimal"},
		{"rate too precise", rent.Input{Jeonse: "100", Rate: "4.123456789"}, "rate", rent.ErrRange, "decimal places"},
		{"rate huge", rent.Input{Jeonse: "100", Rate: "99999999999999999999"}, "rate", rent.ErrRange, "between 0 and 100"},
		{"rate fraction", rent.Input{Jeonse: "100", Rate: "9/2"}, "rate", rent.ErrSyntax, "plain decimal"},
		{"neither direction", rent.Input{Deposit: "1", Rate: "4"}, "jeonse", rent.ErrMissing, "required"},
		{"both directions", rent.Input{Jeonse: "1", MonthlyRent: "1", Rate: "4"}, "monthlyRent", rent.ErrConflict, "not both"},
		{"jeonse overflow", rent.Input{Jeonse: "9223372036854775808", Rate: "4"}, "jeonse", rent.ErrRange, "maximum"},
		{"fractional won", rent.Input{Jeonse: "1.5", Rate: "4"}, "jeonse", rent.ErrSyntax, "whole number"},
		{"exponent won", rent.Input{Jeonse: "3e8", Rate: "4"}, "jeonse", rent.ErrSyntax, "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := calc(t, tt.in)
			var fe *rent.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Parse(%+v) = %v, want a *rent.FieldError", tt.in, err)
			}
			got := struct{ Field, Reason string }{fe.Field, fe.Err.Error()}
			want := struct{ Field, Reason string }{tt.field, tt.reason.Error()}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse(%+v) field/reason (-want,+got):\n%s", tt.in, diff)
			}
			if !errors.Is(err, tt.reason) || !strings.Contains(fe.Reason, tt.inMessage) {
				t.Errorf("Parse(%+v) = %q, want errors.Is %v and a message containing %q", tt.in, err, tt.reason, tt.inMessage)
			}
		})
	}
}

func TestReverseOverflow(t *testing.T) {
	t.Parallel()
	_, err := calc(t, rent.Input{MonthlyRent: "9223372036854775807", Rate: "0.00000001"})
	var fe *rent.FieldError
	if !errors.As(err, &fe) || fe.Field != "monthlyRent" || !errors.Is(err, rent.ErrRange) {
		t.Fatalf("reverse overflow: got %v, want a range error on monthlyRent", err)
	}
}

func TestFromQuery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		query string
		want  rent.Input
		field string
	}{
		{query: "jeonse=300000000&deposit=100000000&rate=4.5&baseRate=3", want: rent.Input{Jeonse: "300000000", Deposit: "100000000", Rate: "4.5", BaseRate: "3"}},
		{query: "monthlyRent=1&rate=4", want: rent.Input{MonthlyRent: "1", Rate: "4"}},
		{query: "jeonse=1&rate=4&foo=1", field: "foo"},
		{query: "jeonse=1&jeonse=2&rate=4", field: "jeonse"},
		{query: "Jeonse=1&rate=4", field: "Jeonse"},
	}
	for _, tt := range tests {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		got, err := rent.FromQuery(q)
		if tt.field != "" {
			var fe *rent.FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("FromQuery(%q) = %v, want an error naming %q", tt.query, err, tt.field)
			}
			continue
		}
		if err != nil {
			t.Fatalf("FromQuery(%q): %v", tt.query, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("FromQuery(%q) (-want,+got):\n%s", tt.query, diff)
		}
	}
}

// TestRoundTrip checks that converting to monthly rent and back lands within
// the rounding error of the forward step (half a won of rent is worth
// 600/rate won of jeonse).
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ jeonse, deposit, rate string }{
		{"300000000", "100000000", "4.5"}, {"987654321", "12345", "5.25"}, {"1", "0", "3"}, {"500000000", "0", "10"},
	} {
		fwd, err := calc(t, rent.Input{Jeonse: json.Number(c.jeonse), Deposit: json.Number(c.deposit), Rate: json.Number(c.rate)})
		if err != nil {
			t.Fatal(err)
		}
		back, err := calc(t, rent.Input{MonthlyRent: json.Number(itoa(fwd.MonthlyRent)), Deposit: json.Number(c.deposit), Rate: json.Number(c.rate)})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := new(big.Rat).SetString(c.rate)
		tol := new(big.Rat).Quo(big.NewRat(600, 1), r)
		diff := new(big.Rat).SetInt64(back.Jeonse - fwd.Jeonse)
		if diff.Abs(diff).Cmp(new(big.Rat).Add(tol, big.NewRat(1, 1))) > 0 {
			t.Errorf("%+v: forward %d won/month, back to jeonse %d, want %d ± %s", c, fwd.MonthlyRent, back.Jeonse, fwd.Jeonse, tol.FloatString(1))
		}
	}
}

func itoa(v int64) string { return new(big.Int).SetInt64(v).String() }
