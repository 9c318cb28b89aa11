package engine

import (
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// minSecret is the shortest string the scrubber hides: shorter ones (a
// "0", "yes") would blank out unrelated text and hide nothing worth hiding.
const minSecret = 4

// scrubber replaces the text of sensitive values wherever a module may have
// copied it: change subjects, messages, error details.
type scrubber struct{ secrets []string }

func (s *scrubber) add(v cty.Value) {
	if v == cty.NilVal || !v.IsWhollyKnown() || v.IsNull() {
		return
	}
	v, _ = v.UnmarkDeep()
	switch {
	case v.Type() == cty.String:
		if str := v.AsString(); len(str) >= minSecret {
			s.secrets = append(s.secrets, str)
		}
	case v.CanIterateElements():
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			s.add(e)
		}
	}
}

func (s *scrubber) scrub(text string) string {
	for _, sec := range s.secrets {
		text = strings.ReplaceAll(text, sec, shownSensitive)
	}
	return text
}

func (e *Event) applyScrub() {
	sc := e.scrub
	e.Message = sc(e.Message)
	if e.Change != nil {
		c := *e.Change
		c.Subject = sc(c.Subject)
		fields := make([]FieldView, len(c.Fields))
		for i, f := range c.Fields {
			fields[i] = FieldView{Name: f.Name, Old: sc(f.Old), New: sc(f.New)}
		}
		c.Fields = fields
		e.Change = &c
	}
	diags := make([]DiagnosticView, len(e.Diagnostics))
	for i, d := range e.Diagnostics {
		d.Summary, d.Detail = sc(d.Summary), sc(d.Detail)
		diags[i] = d
	}
	e.Diagnostics = diags
}
