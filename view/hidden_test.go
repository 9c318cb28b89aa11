package view

import (
	"bytes"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
)

// TestDiagnosticsSkipHiddenLines: a diagnostic whose source spans a line
// holding a secret names the line but does not quote it; others quote.
func TestDiagnosticsSkipHiddenLines(t *testing.T) {
	src := []byte("win01 ansible_user=admin\nwin02 ansible_password=hunter22 oops\n")
	var out bytes.Buffer
	h := NewHuman(&out, HumanOptions{
		Sources: map[string][]byte{"inv.ini": src},
		Hidden:  func(file string, line int) bool { return file == "inv.ini" && line == 2 },
	})
	at := func(line, from, to int) *hcl.Range {
		start := 0
		if line == 2 {
			start = 25
		}
		return &hcl.Range{Filename: "inv.ini", Start: hcl.Pos{Line: line, Column: from, Byte: start + from - 1}, End: hcl.Pos{Line: line, Column: to, Byte: start + to - 1}}
	}
	h.Diagnostics(hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "On the secret's line", Detail: "Something.", Subject: at(2, 33, 37)},
		{Severity: hcl.DiagError, Summary: "Elsewhere", Subject: at(1, 7, 17)},
		{Severity: hcl.DiagError, Summary: "Context spans it", Subject: at(1, 1, 6), Context: &hcl.Range{Filename: "inv.ini", Start: hcl.Pos{Line: 1, Column: 1}, End: hcl.Pos{Line: 2, Column: 5, Byte: 29}}},
	})
	text := out.String()
	assert.NotContains(t, text, "hunter22")
	assert.Contains(t, text, "on inv.ini line 2")
	assert.Contains(t, text, "The source line is not shown: it holds a sensitive value.")
	assert.Contains(t, text, "1: win01 ansible_user=admin", "a line without a secret is quoted")
}
