package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/baton-cron/baton/shared/schedule"
)

// nextMaxCount bounds -n so a typo cannot print forever.
const nextMaxCount = 10000

// newNextCmd builds `baton next`. It is a constructor, not a package
// variable, so that tests get fresh flags on every run.
func newNextCmd(now func() time.Time) *cobra.Command {
	var (
		tz    string
		from  string
		count int
		out   *outputFormat
	)
	cmd := &cobra.Command{
		Use:   "next EXPR",
		Short: "Print the next fire times of a cron expression",
		Long: `Print the next fire times of a cron expression, one per line, in RFC 3339
with the zone's offset. EXPR is 5-field unix cron, 6 fields with leading
seconds, @hourly/@daily/…, or "@every 90s"; quote it. DST gaps fire once at
the end of the gap; repeated fall-back times fire at their first occurrence.`,
		Example: `  baton next '*/15 * * * *' --tz Europe/Berlin --from 2026-03-29T01:30:00+01:00 -n 4`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError("next: want exactly one argument, the cron expression (quote it), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if count < 1 || count > nextMaxCount {
				return usageError("next: -n %d: want 1 to %d", count, nextMaxCount)
			}
			spec, err := schedule.Parse(args[0])
			if err != nil {
				return usageError("next: %v", err)
			}
			loc, err := schedule.LoadLocation(tz)
			if err != nil {
				return usageError("next: --tz: %v", err)
			}
			start := now()
			if from != "" {
				if start, err = time.Parse(time.RFC3339, from); err != nil {
					return usageError("next: --from %q is not RFC 3339 (such as 2026-03-29T01:30:00+01:00): %v", from, err)
				}
			}
			times := nextFireTimes(spec, loc, start, count)
			doc := nextDoc{Expression: args[0], TimeZone: zoneName(tz), FireTimes: times}
			w := cmd.OutOrStdout()
			return out.print(w, doc, func() error {
				for _, t := range times {
					if _, err := fmt.Fprintln(w, t.Format(time.RFC3339)); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return usageError("next: %v", err)
	})
	cmd.Flags().StringVar(&tz, "tz", "", "IANA time zone such as Europe/Berlin (default UTC)")
	cmd.Flags().StringVar(&from, "from", "", "list fire times strictly after this RFC 3339 time (default now)")
	cmd.Flags().IntVarP(&count, "count", "n", 5, "how many fire times to print")
	out = addOutput(cmd, `{"expression":…,"timeZone":…,"fireTimes":[…]}`)
	return cmd
}

// nextDoc is what next -o json|yaml prints.
type nextDoc struct {
	Expression string      `json:"expression"`
	TimeZone   string      `json:"timeZone"`
	FireTimes  []time.Time `json:"fireTimes"`
}

// nextFireTimes is up to count fire times of spec in loc strictly after
// start (fewer when the expression stops firing), each in loc.
func nextFireTimes(spec schedule.Spec, loc *time.Location, start time.Time, count int) []time.Time {
	return schedule.Upcoming(spec, loc, start, count)
}

func init() {
	rootCmd.AddCommand(newNextCmd(time.Now))
}
