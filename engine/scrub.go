package engine

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// MinSecret is the shortest text the scrubber replaces inside other text:
// shorter ones (a "0", "yes") would blank out unrelated output and the
// text left around them would give them away anyway. A shorter secret is
// still hidden wherever its value is rendered, by its sensitive mark.
const MinSecret = 4

// Scrubber is a run's set of known secret texts, and the one place that
// removes them from what the run shows: every event string, every
// diagnostic the run returns, the summaries of a saved plan. A secret is
// registered before anything that could print it runs (setup registers the
// inventory's and the inputs' secrets before it reports its own
// diagnostics; the engine registers each value it marks sensitive when it
// makes it), and is replaced wherever it occurs, also inside a longer text
// such as a command's stderr that echoes one argument of many. Safe for
// concurrent use: hosts register and scrub at once.
type Scrubber struct {
	mu      sync.RWMutex
	secrets map[string]bool
	sorted  []string // longest first; nil when secrets changed
}

// NewScrubber returns an empty scrubber.
func NewScrubber() *Scrubber { return &Scrubber{secrets: map[string]bool{}} }

// Add registers a secret's text, and the forms a program or an error
// message is likely to print it in: each of its lines (a key's lines come
// back one by one, or with other line endings) and its Go- and JSON-quoted
// forms (an error message quoting it with %q escapes quotes and
// backslashes).
func (s *Scrubber) Add(text string) {
	forms := []string{text}
	if strings.ContainsAny(text, "\r\n") {
		for _, l := range strings.Split(text, "\n") {
			forms = append(forms, strings.TrimSuffix(l, "\r"))
		}
	}
	if q := strconv.Quote(text); q[1:len(q)-1] != text {
		forms = append(forms, q[1:len(q)-1])
	}
	if j, err := json.Marshal(text); err == nil && string(j[1:len(j)-1]) != text {
		forms = append(forms, string(j[1:len(j)-1]))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range forms {
		if len(strings.TrimSpace(f)) >= MinSecret && !s.secrets[f] {
			s.secrets[f] = true
			s.sorted = nil
		}
	}
}

// AddValue registers every string in v (v itself, or the elements of a
// collection, deeply), marked or not: v is a secret as a whole.
func (s *Scrubber) AddValue(v cty.Value) {
	if v == cty.NilVal || !v.IsKnown() || v.IsNull() {
		return
	}
	v, _ = v.Unmark()
	switch {
	case v.Type() == cty.String:
		s.Add(v.AsString())
	case v.CanIterateElements():
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			s.AddValue(e)
		}
	}
}

// AddMarked registers the parts of v marked sensitive.
func (s *Scrubber) AddMarked(v cty.Value) {
	if v == cty.NilVal || !v.ContainsMarked() {
		return
	}
	plain, paths := v.UnmarkDeepWithPaths()
	for _, pm := range paths {
		if _, ok := pm.Marks[Sensitive]; !ok {
			continue
		}
		if part, err := pm.Path.Apply(plain); err == nil {
			s.AddValue(part)
		}
	}
}

// Contains reports whether text holds a registered secret.
func (s *Scrubber) Contains(text string) bool {
	for _, sec := range s.list() {
		if strings.Contains(text, sec) {
			return true
		}
	}
	return false
}

// list is the secrets, longest first.
func (s *Scrubber) list() []string {
	if s == nil {
		return nil
	}
	s.mu.RLock()
	sorted := s.sorted
	s.mu.RUnlock()
	if sorted != nil {
		return sorted
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sorted == nil {
		s.sorted = make([]string, 0, len(s.secrets))
		for sec := range s.secrets {
			s.sorted = append(s.sorted, sec)
		}
		sort.Slice(s.sorted, func(i, j int) bool { return len(s.sorted[i]) > len(s.sorted[j]) })
	}
	return s.sorted
}

// Scrub replaces every occurrence of a registered secret in text by
// "(sensitive)". Occurrences that overlap (one secret inside or across
// another) are merged first, so no part of either is left over.
func (s *Scrubber) Scrub(text string) string {
	secrets := s.list()
	if len(secrets) == 0 || text == "" {
		return text
	}
	type span struct{ from, to int }
	var spans []span
	for _, sec := range secrets {
		for off := 0; ; {
			i := strings.Index(text[off:], sec)
			if i < 0 {
				break
			}
			spans = append(spans, span{off + i, off + i + len(sec)})
			off += i + 1
		}
	}
	if len(spans) == 0 {
		return text
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); {
		from, to := spans[i].from, spans[i].to
		for i++; i < len(spans) && spans[i].from <= to; i++ {
			to = max(to, spans[i].to)
		}
		b.WriteString(text[last:from])
		b.WriteString(shownSensitive)
		last = to
	}
	b.WriteString(text[last:])
	return b.String()
}

// Diagnostics returns diags with their summaries and details scrubbed
// (copies: the originals may be shared). The expression and evaluation
// context go: they hold the values themselves.
func (s *Scrubber) Diagnostics(diags hcl.Diagnostics) hcl.Diagnostics {
	if len(diags) == 0 {
		return diags
	}
	out := make(hcl.Diagnostics, len(diags))
	for i, d := range diags {
		c := *d
		c.Summary, c.Detail = s.Scrub(c.Summary), s.Scrub(c.Detail)
		c.Expression, c.EvalContext = nil, nil
		out[i] = &c
	}
	return out
}

// applyScrub removes secret text from an event's strings.
func (e *Event) applyScrub(sc func(string) string) {
	e.Message = sc(e.Message)
	if e.Change != nil {
		c := *e.Change
		c.Subject, c.Diff = sc(c.Subject), sc(c.Diff)
		fields := make([]FieldView, len(c.Fields))
		for i, f := range c.Fields {
			f.Name, f.Old, f.New = sc(f.Name), sc(f.Old), sc(f.New)
			f.Before, f.After = scrubJSON(f.Before, sc), scrubJSON(f.After, sc)
			fields[i] = f
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

// scrubJSON is raw with sc applied to every string in it, keys included;
// raw itself when nothing changes. JSON that does not parse (never made
// by wsu) is dropped rather than passed on unscrubbed.
func scrubJSON(raw json.RawMessage, sc func(string) string) json.RawMessage {
	if len(raw) == 0 {
		return raw
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil
	}
	changed := false
	v = scrubJSONValue(v, sc, &changed)
	if !changed {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return out
}

func scrubJSONValue(v any, sc func(string) string, changed *bool) any {
	switch x := v.(type) {
	case string:
		s := sc(x)
		*changed = *changed || s != x
		return s
	case json.Number:
		// A secret that is all digits: the number becomes the
		// scrubbed text.
		if s := sc(string(x)); s != string(x) {
			*changed = true
			return s
		}
		return x
	case []any:
		for i := range x {
			x[i] = scrubJSONValue(x[i], sc, changed)
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			sk := sc(k)
			*changed = *changed || sk != k
			out[sk] = scrubJSONValue(e, sc, changed)
		}
		return out
	}
	return v
}
