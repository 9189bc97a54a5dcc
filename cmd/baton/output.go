package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// The values of -o/--output.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFormat is the -o/--output flag of a command that prints a resource
// or a list, with --json as an alias of -o json. table (the default) is for
// people; json and yaml carry the API's field names (yaml is made from the
// JSON, so the two always agree).
type outputFormat struct {
	format string
	asJSON bool
}

// addOutput registers -o/--output and --json on cmd and checks them before
// the command runs (so a bad value is a usage error before any request).
// jsonShape describes the JSON document, for the help text.
func addOutput(cmd *cobra.Command, jsonShape string) *outputFormat {
	o := &outputFormat{}
	f := cmd.Flags()
	f.StringVarP(&o.format, "output", "o", outputTable, "output format: table, json or yaml")
	help := "same as -o json"
	if jsonShape != "" {
		help += " (" + jsonShape + ")"
	}
	f.BoolVar(&o.asJSON, "json", false, help)
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if err := o.check(c); err != nil {
			return err
		}
		if prev != nil {
			return prev(c, args)
		}
		return nil
	}
	return o
}

// check validates the flags and settles --json into format.
func (o *outputFormat) check(c *cobra.Command) error {
	path := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
	switch o.format {
	case outputTable, outputJSON, outputYAML:
	default:
		return usageError("%s: --output (-o) %q: want table, json or yaml", path, o.format)
	}
	if o.asJSON {
		if c.Flags().Changed("output") && o.format != outputJSON {
			return usageError("%s: --json is -o json; it contradicts --output %s", path, o.format)
		}
		o.format = outputJSON
	}
	return nil
}

// table reports whether the people's format was asked for.
func (o *outputFormat) table() bool { return o.format == outputTable }

// print writes v as JSON or YAML, or calls table for the table format.
func (o *outputFormat) print(w io.Writer, v any, table func() error) error {
	switch o.format {
	case outputJSON:
		return writeJSON(w, v)
	case outputYAML:
		return writeYAML(w, v)
	}
	return table()
}

// writeJSON writes v as indented JSON, without HTML escaping.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeYAML writes v as YAML through its JSON form, so field names and
// value formats (durations, times) are those of -o json.
func writeYAML(w io.Writer, v any) error {
	j, err := json.Marshal(v)
	if err != nil {
		return err
	}
	y, err := yaml.JSONToYAML(j)
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	_, err = w.Write(y)
	return err
}
