// Package hostvars reads a host's inventory variables as the typed settings
// a transport needs: strings, paths, whole numbers in a range, ports,
// booleans, durations and lists.
//
// Each setting is looked up by a list of names, wsu's first and then
// Ansible's aliases, so an Ansible inventory works unchanged; the first name
// that is set and not null wins. A Reader keeps the first error and every
// error has one form, "file:line:col: name message", naming the variable
// and where it was set, so the SSH and WinRM transports report inventory
// mistakes alike. A getter that fails returns its default; callers check
// Err once at the end.
package hostvars

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/inventory"
)

// Reader reads typed variables of one host, keeping the first error.
type Reader struct {
	vars map[string]inventory.Var
	err  error
}

// New reads vars.
func New(vars map[string]inventory.Var) *Reader { return &Reader{vars: vars} }

// Err is the first error found, or nil.
func (r *Reader) Err() error { return r.err }

// lookup returns the first of names that is set and not null, unmarked. An
// unknown value is an error: it cannot be a setting.
func (r *Reader) lookup(names []string) (string, cty.Value, bool) {
	for _, n := range names {
		v, ok := r.vars[n]
		if !ok {
			continue
		}
		val, _ := v.Value.Unmark()
		if val.IsNull() {
			continue
		}
		if !val.IsKnown() {
			r.failAt(n, v, "is not known yet")
			return "", cty.NilVal, false
		}
		return n, val, true
	}
	return "", cty.NilVal, false
}

// Set reports whether one of names is set and not null.
func (r *Reader) Set(names []string) bool {
	_, _, ok := r.lookup(names)
	return ok
}

// chosen is the variable a message about names is about: the first that
// is present, or the first name (without a place) when none is.
func (r *Reader) chosen(names []string) (string, inventory.Var) {
	for _, n := range names {
		if v, ok := r.vars[n]; ok {
			return n, v
		}
	}
	return names[0], inventory.Var{}
}

// Where is "file:line:col: " for the variable that supplied names, or ""
// when none was set in a file; it starts warnings about that variable.
func (r *Reader) Where(names []string) string {
	_, v := r.chosen(names)
	return where(v)
}

func where(v inventory.Var) string {
	if v.Range.Filename == "" {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d: ", v.Range.Filename, v.Range.Start.Line, v.Range.Start.Column)
}

// Fail records msg about the variable that supplied names (the first name
// when it was defaulted), unless an error is already recorded.
func (r *Reader) Fail(names []string, msg string) {
	n, v := r.chosen(names)
	r.failAt(n, v, msg)
}

// Failf is Fail with a format.
func (r *Reader) Failf(names []string, format string, args ...any) {
	r.Fail(names, fmt.Sprintf(format, args...))
}

func (r *Reader) failAt(name string, v inventory.Var, msg string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s%s %s", where(v), name, msg)
	}
}

// text is a value as an INI inventory would write it: numbers and bools
// spelled out.
func text(val cty.Value) (string, bool) {
	switch val.Type() {
	case cty.String:
		return val.AsString(), true
	case cty.Number:
		return val.AsBigFloat().Text('f', -1), true
	case cty.Bool:
		return strconv.FormatBool(val.True()), true
	}
	return "", false
}

// Raw is the variable as written, surrounding spaces kept (a password's
// spaces count), or def when it is not set.
func (r *Reader) Raw(names []string, def string) string {
	n, val, ok := r.lookup(names)
	if !ok {
		return def
	}
	s, ok := text(val)
	if !ok {
		r.failAt(n, r.vars[n], "must be a string, not "+val.Type().FriendlyName())
		return def
	}
	return s
}

// Str is Raw without surrounding spaces; def is returned as given.
func (r *Reader) Str(names []string, def string) string {
	if _, _, ok := r.lookup(names); !ok {
		return def
	}
	return strings.TrimSpace(r.Raw(names, def))
}

// Path is Str with a leading ~/ expanded as a shell would.
func (r *Reader) Path(names []string, def string) string {
	p := r.Str(names, def)
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			p = filepath.Join(home, p[1:])
		}
	}
	return p
}

// whole reads a whole number, from a number or a string.
func whole(val cty.Value) (int, bool) {
	switch val.Type() {
	case cty.Number:
		if i, acc := val.AsBigFloat().Int64(); acc == big.Exact {
			return int(i), true
		}
	case cty.String:
		if i, err := strconv.Atoi(strings.TrimSpace(val.AsString())); err == nil {
			return i, true
		}
	}
	return 0, false
}

// Int reads a whole number.
func (r *Reader) Int(names []string, def int) int {
	n, val, ok := r.lookup(names)
	if !ok {
		return def
	}
	i, ok := whole(val)
	if !ok {
		r.failAt(n, r.vars[n], "must be a whole number"+not(val))
		return def
	}
	return i
}

// IntIn reads a whole number from lo to hi.
func (r *Reader) IntIn(names []string, def, lo, hi int) int {
	n, val, ok := r.lookup(names)
	if !ok {
		return def
	}
	i, ok := whole(val)
	if !ok || i < lo || i > hi {
		r.failAt(n, r.vars[n], fmt.Sprintf("must be a whole number from %d to %d", lo, hi)+not(val))
		return def
	}
	return i
}

// Port reads a TCP port.
func (r *Reader) Port(names []string, def int) int { return r.IntIn(names, def, 1, 65535) }

// not is `, not "value"` for a message about a value of the wrong form.
func not(val cty.Value) string {
	if s, ok := text(val); ok {
		return fmt.Sprintf(", not %q", s)
	}
	return ", not " + val.Type().FriendlyName()
}

// Bool reads true or false, or Ansible's INI spellings of them (yes/no,
// on/off, 1/0).
func (r *Reader) Bool(names []string, def bool) bool {
	n, val, ok := r.lookup(names)
	if !ok {
		return def
	}
	switch val.Type() {
	case cty.Bool:
		return val.True()
	case cty.String:
		switch strings.ToLower(strings.TrimSpace(val.AsString())) {
		case "true", "yes", "on", "1":
			return true
		case "false", "no", "off", "0":
			return false
		}
	}
	r.failAt(n, r.vars[n], "must be true or false")
	return def
}

// seconds reads a number of seconds, from a number or a string.
func seconds(val cty.Value) (time.Duration, bool) {
	var f float64
	switch val.Type() {
	case cty.Number:
		f, _ = val.AsBigFloat().Float64()
	case cty.String:
		var err error
		if f, err = strconv.ParseFloat(strings.TrimSpace(val.AsString()), 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// Duration reads "90s", "5m" or a number of seconds (Ansible's timeouts),
// not negative.
func (r *Reader) Duration(names []string, def time.Duration) time.Duration {
	n, val, ok := r.lookup(names)
	if !ok {
		return def
	}
	d, ok := seconds(val)
	if !ok && val.Type() == cty.String {
		var err error
		d, err = time.ParseDuration(strings.TrimSpace(val.AsString()))
		ok = err == nil
	}
	if !ok || d < 0 {
		r.failAt(n, r.vars[n], `must be a duration such as "30s" or "5m", or a number of seconds`)
		return def
	}
	return d
}

// maxTimeout bounds Seconds: a day, more than any timeout means.
const maxTimeout = 24 * time.Hour

// Seconds reads a positive number of seconds up to a day, the only form
// Ansible's *_sec variables take.
func (r *Reader) Seconds(names []string, def time.Duration) time.Duration {
	n, val, ok := r.lookup(names)
	if !ok {
		return def
	}
	d, ok := seconds(val)
	if !ok || d <= 0 || d > maxTimeout {
		r.failAt(n, r.vars[n], "must be a positive number of seconds"+not(val))
		return def
	}
	return d
}

// List reads a list of strings or one space-separated string.
func (r *Reader) List(names []string) []string {
	n, val, ok := r.lookup(names)
	if !ok {
		return nil
	}
	t := val.Type()
	switch {
	case t == cty.String:
		return strings.Fields(val.AsString())
	case t.IsListType() || t.IsTupleType() || t.IsSetType():
		var out []string
		for it := val.ElementIterator(); it.Next(); {
			_, e := it.Element()
			e, _ = e.Unmark()
			if e.IsNull() || !e.IsKnown() || e.Type() != cty.String {
				r.failAt(n, r.vars[n], "must be a list of strings")
				return nil
			}
			out = append(out, e.AsString())
		}
		return out
	}
	r.failAt(n, r.vars[n], "must be a list of strings or a space-separated string")
	return nil
}
