package hostvars

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/inventory"
)

// at is a variable set at hosts.ini:4:7.
func at(v cty.Value) inventory.Var {
	return inventory.Var{Value: v, Range: hcl.Range{Filename: "hosts.ini", Start: hcl.Pos{Line: 4, Column: 7}}}
}

var portNames = []string{"port", "ansible_port", "ansible_ssh_port"}

// The first name set and not null wins; an unset setting is its default.
func TestLookupOrder(t *testing.T) {
	r := New(map[string]inventory.Var{
		"port":             at(cty.NullVal(cty.String)),
		"ansible_port":     at(cty.StringVal("2222")),
		"ansible_ssh_port": at(cty.NumberIntVal(22)),
	})
	if got := r.Port(portNames, 22); got != 2222 {
		t.Errorf("Port = %d, want 2222 from ansible_port", got)
	}
	if got := r.Str([]string{"user"}, "admin"); got != "admin" {
		t.Errorf("unset Str = %q, want the default", got)
	}
	if r.Set([]string{"user"}) || !r.Set(portNames) {
		t.Error("Set is wrong")
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
}

// Each getter takes the forms inventories write: INI strings as well as
// typed values.
func TestForms(t *testing.T) {
	r := New(map[string]inventory.Var{
		"s":    at(cty.StringVal("  x y  ")),
		"n":    at(cty.NumberIntVal(5)),
		"b":    at(cty.StringVal("yes")),
		"d":    at(cty.StringVal("90s")),
		"ds":   at(cty.StringVal("1.5")),
		"dn":   at(cty.NumberIntVal(30)),
		"l":    at(cty.TupleVal([]cty.Value{cty.StringVal("a b"), cty.StringVal("c")})),
		"sec":  at(cty.StringVal("20")),
		"mark": at(cty.StringVal("secret").Mark("sensitive")),
	})
	checks := []struct {
		name      string
		got, want any
	}{
		{"Str trims", r.Str([]string{"s"}, ""), "x y"},
		{"Raw keeps spaces", r.Raw([]string{"s"}, ""), "  x y  "},
		{"Str spells a number", r.Str([]string{"n"}, ""), "5"},
		{"Int from a number", r.Int([]string{"n"}, 0), 5},
		{"Bool from yes", r.Bool([]string{"b"}, false), true},
		{"Duration from 90s", r.Duration([]string{"d"}, 0), 90 * time.Second},
		{"Duration from seconds text", r.Duration([]string{"ds"}, 0), 1500 * time.Millisecond},
		{"Duration from a number", r.Duration([]string{"dn"}, 0), 30 * time.Second},
		{"Seconds", r.Seconds([]string{"sec"}, 0), 20 * time.Second},
		{"List of strings", strings.Join(r.List([]string{"l"}), "|"), "a b|c"},
		{"List from text", strings.Join(r.List([]string{"s"}), "|"), "x|y"},
		{"marked value", r.Str([]string{"mark"}, ""), "secret"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
}

// An error names the variable that supplied the value and where it was
// set, and says what is wanted; a failed getter returns its default.
func TestErrors(t *testing.T) {
	tests := []struct {
		name string
		v    cty.Value
		read func(r *Reader, names []string) any
		want string
	}{
		{"port range", cty.StringVal("70000"), func(r *Reader, n []string) any { return r.Port(n, 22) },
			`hosts.ini:4:7: ansible_port must be a whole number from 1 to 65535, not "70000"`},
		{"int", cty.StringVal("ssh"), func(r *Reader, n []string) any { return r.Int(n, 22) },
			`hosts.ini:4:7: ansible_port must be a whole number, not "ssh"`},
		{"bool", cty.StringVal("maybe"), func(r *Reader, n []string) any { r.Bool(n, false); return 22 },
			"hosts.ini:4:7: ansible_port must be true or false"},
		{"duration", cty.StringVal("soon"), func(r *Reader, n []string) any { r.Duration(n, 0); return 22 },
			`hosts.ini:4:7: ansible_port must be a duration such as "30s" or "5m", or a number of seconds`},
		{"seconds", cty.StringVal("30s"), func(r *Reader, n []string) any { r.Seconds(n, 0); return 22 },
			`hosts.ini:4:7: ansible_port must be a positive number of seconds, not "30s"`},
		{"seconds beyond a day", cty.NumberIntVal(90000), func(r *Reader, n []string) any { r.Seconds(n, 0); return 22 },
			`ansible_port must be a positive number of seconds, not "90000"`},
		{"string", cty.ListValEmpty(cty.String), func(r *Reader, n []string) any { r.Str(n, ""); return 22 },
			"hosts.ini:4:7: ansible_port must be a string, not list of string"},
		{"list", cty.NumberIntVal(1), func(r *Reader, n []string) any { r.List(n); return 22 },
			"hosts.ini:4:7: ansible_port must be a list of strings or a space-separated string"},
		{"unknown", cty.UnknownVal(cty.String), func(r *Reader, n []string) any { r.Str(n, ""); return 22 },
			"hosts.ini:4:7: ansible_port is not known yet"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := New(map[string]inventory.Var{"ansible_port": at(tc.v)})
			if got := tc.read(r, portNames); got != 22 {
				t.Errorf("got %v, want the default 22", got)
			}
			if r.Err() == nil || !strings.Contains(r.Err().Error(), tc.want) {
				t.Fatalf("err = %v, want %q", r.Err(), tc.want)
			}
		})
	}
}

// Fail and Where name the variable that supplied names, or the first name
// when it was defaulted; only the first error is kept.
func TestFailAndWhere(t *testing.T) {
	r := New(map[string]inventory.Var{"ansible_port": at(cty.StringVal("22"))})
	if got := r.Where(portNames); got != "hosts.ini:4:7: " {
		t.Errorf("Where = %q", got)
	}
	if got := r.Where([]string{"user"}); got != "" {
		t.Errorf("Where of an unset variable = %q, want empty", got)
	}
	r.Failf([]string{"user", "ansible_user"}, "must be %s", "set")
	r.Fail(portNames, "second error")
	if r.Err() == nil || r.Err().Error() != "user must be set" {
		t.Fatalf("err = %v, want the first error, naming user without a place", r.Err())
	}
	r = New(map[string]inventory.Var{"ansible_port": at(cty.StringVal("22"))})
	r.Fail(portNames, "is wrong")
	if r.Err() == nil || r.Err().Error() != "hosts.ini:4:7: ansible_port is wrong" {
		t.Fatalf("err = %v", r.Err())
	}
}
