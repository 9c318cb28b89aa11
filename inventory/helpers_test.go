package inventory

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// parse runs the parser named by format ("ini", "yaml" or "hcl") and fails the test
// on any diagnostic.
func parse(t *testing.T, format, src string) *Inventory {
	t.Helper()
	inv, diags := parseAs(format, src)
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics:\n%s", diagText(diags))
	}
	return inv
}

func parseAs(format, src string) (*Inventory, hcl.Diagnostics) {
	switch format {
	case "yaml":
		return ParseYAML("inv.yml", []byte(src))
	case "hcl":
		return ParseHCL("inv.hcl", []byte(src))
	}
	return ParseINI("inv.ini", []byte(src))
}

func diagText(diags hcl.Diagnostics) string {
	var sb strings.Builder
	for _, d := range diags {
		loc := "-"
		if d.Subject != nil {
			loc = fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column)
		}
		fmt.Fprintf(&sb, "  %s %s: %s\n", loc, d.Summary, d.Detail)
	}
	return sb.String()
}

// str renders a value compactly for comparisons: strings bare, numbers and
// bools via their string form, anything else as its Go-syntax dump.
func str(v cty.Value) string {
	if v.IsNull() {
		return "<null>"
	}
	if s, err := convert.Convert(v, cty.String); err == nil {
		return s.AsString()
	}
	return v.GoString()
}

// varStrings flattens a var map for easy comparison.
func varStrings(vars map[string]Var) map[string]string {
	out := map[string]string{}
	for k, v := range vars {
		out[k] = str(v.Value)
	}
	return out
}

func equal(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got: %#v\nwant: %#v", what, got, want)
	}
}

func sorted(list []string) []string {
	out := append([]string(nil), list...)
	sort.Strings(out)
	return out
}
