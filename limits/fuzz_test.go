package limits

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// limitSeeds are nesting just inside and far beyond the bounds, in every
// form, and an input past the size bound.
func limitSeeds(f *testing.F) {
	for _, mk := range nestings {
		f.Add([]byte("x = " + mk(MaxNesting-1) + "\n"))
		f.Add([]byte("x = " + mk(MaxNesting+1) + "\n"))
		f.Add([]byte("x = " + mk(5000) + "\n"))
	}
	f.Add([]byte("x = 1" + strings.Repeat("+1", 5000) + "\n"))
	f.Add([]byte("x = \"" + strings.Repeat("a", MaxFileSize) + "\"\n"))
}

// FuzzCheckConfig: whatever CheckConfig accepts, the parser parses and
// evaluates without crashing (a stack overflow fails the fuzzer), and
// what it refuses is refused at a place inside the input.
func FuzzCheckConfig(f *testing.F) {
	limitSeeds(f)
	f.Fuzz(func(t *testing.T, src []byte) {
		diags := CheckConfig(src, "f.hcl", hcl.InitialPos)
		if diags.HasErrors() {
			s := diags[0].Subject
			if s == nil || s.Start.Byte > len(src) || s.Start.Line < 1 {
				t.Fatalf("refusal outside the input: %v", diags[0].Subject)
			}
			return
		}
		file, d := hclsyntax.ParseConfig(src, "f.hcl", hcl.InitialPos)
		if d.HasErrors() {
			return
		}
		attrs, _ := file.Body.JustAttributes()
		for _, a := range attrs {
			_ = a.Expr.Variables()
			_, _ = a.Expr.Value(nil)
		}
	})
}

// FuzzCheckExpression is FuzzCheckConfig for one -var value.
func FuzzCheckExpression(f *testing.F) {
	for _, mk := range nestings {
		f.Add([]byte(mk(MaxNesting - 1)))
		f.Add([]byte(mk(5000)))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		if CheckExpression(src, "<-var>", hcl.InitialPos, MaxValueSize).HasErrors() {
			return
		}
		expr, d := hclsyntax.ParseExpression(src, "<-var>", hcl.InitialPos)
		if d.HasErrors() {
			return
		}
		_ = expr.Variables()
		_, _ = expr.Value(nil)
	})
}

// FuzzCheckTemplate is FuzzCheckConfig for a templatefile template.
func FuzzCheckTemplate(f *testing.F) {
	f.Add([]byte(strings.Repeat("%{if true}", MaxNesting-1) + strings.Repeat("%{endif}", MaxNesting-1)))
	f.Add([]byte(strings.Repeat("%{for x in [1]}", 5000)))
	f.Add([]byte(strings.Repeat("${(", 5000)))
	f.Fuzz(func(t *testing.T, src []byte) {
		if CheckTemplate(src, "t.tmpl", hcl.InitialPos).HasErrors() {
			return
		}
		expr, d := hclsyntax.ParseTemplate(src, "t.tmpl", hcl.InitialPos)
		if d.HasErrors() {
			return
		}
		_ = expr.Variables()
	})
}
