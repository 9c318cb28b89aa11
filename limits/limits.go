// Package limits bounds the input wsu parses and converts — playbooks,
// inventories, variable files, -var and WSU_VAR_ values, templates — and
// refuses what is beyond the bounds with an error located in the input,
// before any of it is parsed or converted. The HCL parser and cty's type
// unification recurse once or more per level of nesting, so tens of
// thousands of brackets overflow the goroutine stack (a fatal error no
// recover catches), and a deeply nested object given to a map(any)
// variable costs time quadratic in its depth. Real input is nowhere near
// the bounds; docs/playbook-language.md (Limits) states them.
package limits

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

const (
	// MaxNesting is how deep brackets, braces, parentheses, quoted
	// strings and heredocs, template interpolations and if/for
	// directives, conditionals and unary operators may nest.
	MaxNesting = 100
	// MaxOperators is how many operators (binary, unary, conditional,
	// attribute and index access, splats) one expression may chain
	// before a comma, a line end or its closing bracket.
	MaxOperators = 1000
	// MaxFileSize is the largest playbook, inventory, variables file or
	// template read.
	MaxFileSize = 2 << 20
	// MaxPlanSize is the largest saved plan read (wsu apply PLANFILE,
	// wsu show): a plan holds every host's changes and their bounded
	// diffs, so it may be larger than any one input.
	MaxPlanSize = 64 << 20
	// MaxValueSize is the largest -var, WSU_VAR_ or inventory value text
	// parsed as an HCL expression.
	MaxValueSize = 256 << 10
	// MaxValues is how many values (each element, attribute and the
	// whole) one outside value may hold.
	MaxValues = 100_000
	// MaxConversionCost bounds the type unification of an outside value
	// whose variable type has `any` inside a collection (map(any),
	// list(any), set(any)): each value inside counts once per level it is
	// nested at.
	MaxConversionCost = 100_000
)

// docRef is where a refusal sends the user.
const docRef = "See Limits in docs/playbook-language.md."

// CheckSize refuses a text of n bytes beyond max.
func CheckSize(n, max int, filename string, start hcl.Pos) hcl.Diagnostics {
	if n <= max {
		return nil
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Input too large",
		Detail:   fmt.Sprintf("%s is %d bytes; wsu reads at most %d. %s", nameOf(filename), n, max, docRef),
		Subject:  &hcl.Range{Filename: filename, Start: start, End: start},
	}}
}

func nameOf(filename string) string {
	if filename == "" {
		return "The input"
	}
	return filename
}
