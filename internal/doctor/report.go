package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Status is a check's outcome.
type Status string

// The outcomes. Only FAIL makes a Report fail: WARN is something to look at
// that does not break baton, SKIP a check that could not be made here (and
// says why).
const (
	Pass Status = "PASS"
	Fail Status = "FAIL"
	Warn Status = "WARN"
	Skip Status = "SKIP"
)

// Result is one check.
type Result struct {
	// Check names what was checked, e.g. "index runs.history".
	Check string `json:"check"`
	// Status is PASS, FAIL, WARN or SKIP.
	Status Status `json:"status"`
	// Detail is what was found.
	Detail string `json:"detail"`
	// Fix is what to do, for FAIL and WARN: the exact command where there is
	// one.
	Fix string `json:"fix,omitempty"`
}

// Report is the outcome of every check, in the order they ran.
type Report struct {
	// Mode is "cloud" or "local".
	Mode string `json:"mode"`
	// Results are the checks.
	Results []Result `json:"results"`
	// OK is true when no check failed.
	OK bool `json:"ok"`
}

func (r *Report) add(check string, s Status, detail, fix string) {
	r.Results = append(r.Results, Result{Check: check, Status: s, Detail: detail, Fix: fix})
}

func (r *Report) pass(check, detail string)      { r.add(check, Pass, detail, "") }
func (r *Report) fail(check, detail, fix string) { r.add(check, Fail, detail, fix) }
func (r *Report) skip(check, detail string)      { r.add(check, Skip, detail, "") }
func (r *Report) warn(check, detail, fix string) { r.add(check, Warn, detail, fix) }
func (r *Report) check(ok bool, check, detail, fix string) {
	if ok {
		r.pass(check, detail)
	} else {
		r.fail(check, detail, fix)
	}
}

// finish sets OK.
func (r *Report) finish() *Report {
	r.OK = true
	for _, x := range r.Results {
		if x.Status == Fail {
			r.OK = false
		}
	}
	return r
}

// WriteTable prints one line per check: status, check, detail and, when
// there is one, the fix.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCHECK\tDETAIL\tFIX")
	for _, x := range r.Results {
		fix := x.Fix
		if fix == "" {
			fix = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.Status, x.Check, oneLine(x.Detail), oneLine(fix))
	}
	verdict := "all checks passed"
	if !r.OK {
		n := 0
		for _, x := range r.Results {
			if x.Status == Fail {
				n++
			}
		}
		verdict = fmt.Sprintf("%d check(s) failed", n)
	}
	fmt.Fprintf(tw, "\n%s (%s)\n", verdict, r.Mode)
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("doctor: write table: %w", err)
	}
	return nil
}

// WriteJSON prints the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("doctor: write json: %w", err)
	}
	return nil
}

// oneLine keeps a table row on one line whatever an error message holds.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	const max = 400
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
