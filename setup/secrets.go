package setup

import (
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/inventory"
)

// secretFiles remembers what Hidden needs: which files are inventories
// and var files (read by name, not only by value), and the names of the
// variables declared sensitive.
type secretFiles struct {
	files     map[string]bool
	sensitive map[string]bool
}

func newSecretFiles(pb *playbook.Playbook, in planfile.Inputs) secretFiles {
	sf := secretFiles{files: map[string]bool{}, sensitive: map[string]bool{}}
	for _, f := range in.InventorySources() {
		sf.files[f] = true
	}
	for _, f := range in.VarFiles {
		sf.files[f] = true
	}
	if in.JoinConfig != "" {
		sf.files[in.JoinConfig] = true
	}
	if pb != nil {
		pb.Walk(func(pb *playbook.Playbook) {
			for n, v := range pb.Variables {
				if v.Sensitive {
					sf.sensitive[n] = true
				}
			}
		})
	}
	return sf
}

// Hidden reports whether line (1-based) of file, as Text holds it, must
// not be quoted: it holds a registered secret; or, in an inventory or a
// var file, it names a secret-like variable (inventory.SecretName) or one
// declared sensitive, or it continues one (a more indented line under such
// a name: a YAML block holding a private key). The names count even when
// the file could not be parsed, so a syntax error on a password's line is
// reported without the line.
func (r *Run) Hidden(file string, line int) bool {
	lines := strings.Split(string(r.Text[file]), "\n")
	if line < 1 || line > len(lines) {
		return false
	}
	text := lines[line-1]
	if r.Secrets.Contains(text) {
		return true
	}
	if !r.secretFiles.files[file] {
		return false
	}
	if r.secretFiles.names(text) {
		return true
	}
	// The nearest less indented line above is the one this continues.
	in := indent(text)
	for k := line - 2; k >= 0 && in > 0; k-- {
		if strings.TrimSpace(lines[k]) == "" {
			continue
		}
		if indent(lines[k]) < in {
			return r.secretFiles.names(lines[k])
		}
	}
	return false
}

// names reports whether a line names a secret-like or sensitive variable.
func (sf secretFiles) names(line string) bool {
	for _, w := range strings.FieldsFunc(line, func(c rune) bool { return c != '_' && !unicode.IsLetter(c) && !unicode.IsDigit(c) }) {
		if inventory.SecretName(w) || sf.sensitive[w] {
			return true
		}
	}
	return false
}

func indent(s string) int {
	return len(s) - len(strings.TrimLeft(s, " \t"))
}

// collectSecrets registers the run's known secrets with its scrubber
// before Prepare reports anything.
func (r *Run) collectSecrets(pb *playbook.Playbook, inv *inventory.Inventory, in planfile.Inputs, environ, secretVars []string) {
	r.secretFiles = newSecretFiles(pb, in)
	engine.CollectSecrets(r.Secrets, pb, inv, engine.Inputs{VarFiles: in.VarFiles, Vars: in.Vars, Environ: environ, SecretVars: secretVars, ValueFiles: r.valueFiles, Files: r.files})
}

// ForSources is a Run for diagnostics over files read outside a run (wsu
// fmt): with no playbook to declare what is sensitive, each file is read
// as a var file is, so a line naming a credential (inventory.SecretName)
// is not quoted. Every command shows its diagnostics through a Run's
// Hidden and Scrub, this one included.
func ForSources(text map[string][]byte) *Run {
	sf := secretFiles{files: map[string]bool{}, sensitive: map[string]bool{}}
	for f := range text {
		sf.files[f] = true
	}
	return &Run{Text: text, Secrets: engine.NewScrubber(), secretFiles: sf}
}

// Scrub is the run's redaction of diagnostics found after Prepare (wsu
// validate's engine.Check): what Prepare applies to its own.
func (r *Run) Scrub(diags hcl.Diagnostics) hcl.Diagnostics { return r.scrub(diags) }

// scrub is the run's scrubber applied to diags, and one step more for a
// diagnostic on a line Hidden refuses to quote: the text its subject
// covers is taken for a secret in its own message, since a parser quotes
// what it could not read ("found \"s3cret\"") and an unreadable value was
// never registered.
func (r *Run) scrub(diags hcl.Diagnostics) hcl.Diagnostics {
	diags = r.Secrets.Diagnostics(diags)
	for _, d := range diags {
		s := d.Subject
		if s == nil || s.Start.Line != s.End.Line || !r.Hidden(s.Filename, s.Start.Line) {
			continue
		}
		src := r.Text[s.Filename]
		if s.Start.Byte < 0 || s.End.Byte > len(src) || s.Start.Byte >= s.End.Byte {
			continue
		}
		quoted := strings.TrimSpace(string(src[s.Start.Byte:s.End.Byte]))
		if len(quoted) < engine.MinSecret {
			continue
		}
		d.Summary = strings.ReplaceAll(d.Summary, quoted, "(sensitive)")
		d.Detail = strings.ReplaceAll(d.Detail, quoted, "(sensitive)")
	}
	return diags
}
