package main

import (
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/baton-cron/baton/client"
	"github.com/baton-cron/baton/shared/schedule"
)

func init() { rootCmd.AddCommand(newExportCmd(schedulesClientFromEnv)) }

// newExportCmd builds `baton export`: the stored schedules and calendars
// as apply documents, so a team can adopt what it has.
func newExportCmd(newClient clientFunc) *cobra.Command {
	var selector string
	cmd := &cobra.Command{
		Use:   "export [-l SELECTOR]",
		Short: "Write the stored calendars and schedules as YAML documents that baton apply takes back unchanged",
		Long: `Write every calendar, then every schedule (or those the selector
keeps) as YAML documents for baton apply: kind, metadata.owner (from
the ` + schedule.OwnerLabel + ` label), then the fields, defaults included,
without the server's own (version, nextRunAt, …). Applying the output
again plans no changes.`,
		Example: `  baton export -l team=data > schedules/data.yaml
  baton apply -f schedules/ --owner team-data --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sel, err := schedule.ParseLabelSelector("--selector", selector)
			if err != nil {
				return usageError("export: %v", err)
			}
			ac, err := newClient()
			if err != nil {
				return err
			}
			c, err := ac.sdk()
			if err != nil {
				return err
			}
			o := client.ListOptions{LabelSelector: sel.String(), PageOptions: client.PageOptions{PageSize: 500}}
			enc := yaml.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent(2)
			for cal, err := range c.ListCalendars(cmd.Context(), o) {
				if err != nil {
					return apiFailure("export", err)
				}
				if err := exportDoc(enc, kindCalendar, cal.ID, &cal); err != nil {
					return err
				}
			}
			for sc, err := range c.ListSchedules(cmd.Context(), o) {
				if err != nil {
					return apiFailure("export", err)
				}
				if err := exportDoc(enc, kindSchedule, sc.ID, &sc); err != nil {
					return err
				}
			}
			return enc.Close()
		},
	}
	flagUsage(cmd)
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "only objects matching this label selector: key=value, key!=value, key in (v1,v2), comma-separated, all must match")
	return cmd
}

// exportDoc writes one document: kind, metadata, id, then the fields in
// name order, so that exports diff well in review.
func exportDoc(enc *yaml.Encoder, kind, id string, v any) error {
	m, err := comparable(v)
	if err != nil {
		return err
	}
	doc := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v any) error {
		var vn yaml.Node
		if err := vn.Encode(v); err != nil {
			return fmt.Errorf("export %s %s: %s: %w", kind, id, k, err)
		}
		doc.Content = append(doc.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &vn)
		return nil
	}
	if err := add("kind", kind); err != nil {
		return err
	}
	if labels, ok := m["labels"].(map[string]any); ok {
		if owner, ok := labels[schedule.OwnerLabel].(string); ok {
			if err := add("metadata", map[string]string{"owner": owner}); err != nil {
				return err
			}
			delete(labels, schedule.OwnerLabel)
			if len(labels) == 0 {
				delete(m, "labels")
			}
		}
	}
	if err := add("id", id); err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if err := add(k, m[k]); err != nil {
			return err
		}
	}
	return enc.Encode(doc)
}
