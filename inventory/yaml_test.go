package inventory

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestParseYAML(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		order     []string
		groups    map[string][]string
		children  map[string][]string
		hostVars  map[string]map[string]string
		groupVars map[string]map[string]string
		hostGrps  map[string][]string
	}{
		{
			name: "standard layout with null hosts and ranges",
			src: `all:
  hosts:
    jump:
  children:
    windows:
      hosts:
        win[01:02]:
        win03: {ansible_host: 10.0.0.3}
      vars:
        ansible_user: Administrator
`,
			order:     []string{"jump", "win01", "win02", "win03"},
			groups:    map[string][]string{"windows": {"win01", "win02", "win03"}, "ungrouped": {"jump"}},
			children:  map[string][]string{"all": {"windows", "ungrouped"}},
			hostVars:  map[string]map[string]string{"win03": {"ansible_host": "10.0.0.3"}, "win01": {}},
			groupVars: map[string]map[string]string{"windows": {"ansible_user": "Administrator"}},
			hostGrps:  map[string][]string{"jump": {"ungrouped"}, "win01": {"windows"}},
		},
		{
			name: "top-level groups without all, nested children, port",
			src: `k8s:
  children:
    windows:
      children:
        gpu:
          hosts:
            win09:5986:
linux:
  hosts: {cp01: }
`,
			order:    []string{"win09", "cp01"},
			children: map[string][]string{"k8s": {"windows"}, "windows": {"gpu"}, "all": {"ungrouped", "k8s", "linux"}},
			hostVars: map[string]map[string]string{"win09": {"ansible_port": "5986"}},
		},
		{
			name: "group defined in two places merges; empty groups",
			src: `all:
  children:
    a:
      hosts: {h1: {x: 1}}
    b:
      children:
        a:
          hosts: {h2: }
          vars: {y: 2}
    empty:
    alsoempty: {hosts: , vars: , children: }
`,
			groups:    map[string][]string{"a": {"h1", "h2"}, "empty": nil, "alsoempty": nil},
			children:  map[string][]string{"b": {"a"}},
			groupVars: map[string]map[string]string{"a": {"y": "2"}},
			hostGrps:  map[string][]string{"h1": {"a"}},
		},
		{
			name: "anchors, aliases and merge keys",
			src: `all:
  vars:
    winrm: &winrm
      ansible_connection: winrm
      ansible_port: 5986
  children:
    windows:
      vars:
        <<: *winrm
        ansible_port: 5985
      hosts:
        w1: *winrm
`,
			groupVars: map[string]map[string]string{"windows": {"ansible_connection": "winrm", "ansible_port": "5985"}},
			hostVars:  map[string]map[string]string{"w1": {"ansible_connection": "winrm", "ansible_port": "5986"}},
		},
		{
			name:     "JSON inventory",
			src:      `{"all": {"hosts": {"a": {"n": 1.5}}, "children": {"g": {"hosts": {"a": null}}}}}`,
			order:    []string{"a"},
			hostGrps: map[string][]string{"a": {"g"}},
			hostVars: map[string]map[string]string{"a": {"n": "1.5"}},
		},
		{
			name:   "empty and comment-only files",
			src:    "# nothing here\n",
			groups: map[string][]string{"all": nil, "ungrouped": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := parse(t, "yaml", tt.src)
			if tt.order != nil {
				equal(t, "order", inv.Order, tt.order)
			}
			checkInventory(t, inv, tt.groups, tt.children, tt.hostVars, tt.groupVars, tt.hostGrps)
		})
	}
}

func TestYAMLValueTypes(t *testing.T) {
	inv := parse(t, "yaml", `all:
  hosts:
    h:
      s: text
      quoted: "5986"
      i: 5986
      neg: -3
      hex: 0x1F
      f: 1.25
      inf: .inf
      nan: .nan
      big: 18446744073709551615
      yes: true
      no: false
      nul:
      tilde: ~
      list: [a, 1, true]
      emptylist: []
      map: {k: v, n: 2, nested: {x: [1]}}
      emptymap: {}
      block: |
        line1
        line2
      date: 2024-01-02
      unsafe: !unsafe "{{ not templated }}"
      explicit: !!str 123
`)
	vars := inv.Hosts["h"].Vars
	tests := []struct {
		key  string
		want cty.Value
	}{
		{"s", cty.StringVal("text")},
		{"quoted", cty.StringVal("5986")},
		{"i", cty.NumberIntVal(5986)},
		{"neg", cty.NumberIntVal(-3)},
		{"hex", cty.NumberIntVal(31)},
		{"f", cty.NumberFloatVal(1.25)},
		{"inf", cty.PositiveInfinity},
		{"nan", cty.StringVal(".nan")},
		{"big", cty.NumberUIntVal(18446744073709551615)},
		{"yes", cty.True},
		{"no", cty.False},
		{"nul", cty.NullVal(cty.DynamicPseudoType)},
		{"tilde", cty.NullVal(cty.DynamicPseudoType)},
		{"list", cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NumberIntVal(1), cty.True})},
		{"emptylist", cty.EmptyTupleVal},
		{"map", cty.ObjectVal(map[string]cty.Value{
			"k": cty.StringVal("v"), "n": cty.NumberIntVal(2),
			"nested": cty.ObjectVal(map[string]cty.Value{"x": cty.TupleVal([]cty.Value{cty.NumberIntVal(1)})}),
		})},
		{"emptymap", cty.EmptyObjectVal},
		{"block", cty.StringVal("line1\nline2\n")},
		{"date", cty.StringVal("2024-01-02")},
		{"unsafe", cty.StringVal("{{ not templated }}")},
		{"explicit", cty.StringVal("123")},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			v, ok := vars[tt.key]
			if !ok {
				t.Fatalf("missing %q", tt.key)
			}
			if !v.Value.RawEquals(tt.want) {
				t.Errorf("got %#v, want %#v", v.Value, tt.want)
			}
		})
	}
}

func TestYAMLVarRanges(t *testing.T) {
	src := "all:\n" +
		"  vars:\n" +
		"    user: admin\n" +
		"    quoted: \"x y\"\n" +
		"    list: [1, 2]\n" +
		"  hosts:\n" +
		"    \"w\xc3\xa9b1\": {port: 22}\n"
	inv := parse(t, "yaml", src)
	tests := []struct {
		key          string
		v            Var
		line, column int
		text         string
	}{
		{"user", inv.Groups["all"].Vars["user"], 3, 11, "admin"},
		{"quoted", inv.Groups["all"].Vars["quoted"], 4, 13, `"x y"`},
		{"list", inv.Groups["all"].Vars["list"], 5, 11, ""},
		{"port", inv.Hosts["wéb1"].Vars["port"], 7, 20, "22"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			r := tt.v.Range
			if r.Filename != "inv.yml" || r.Start.Line != tt.line || r.Start.Column != tt.column {
				t.Errorf("at %s:%d:%d, want %d:%d", r.Filename, r.Start.Line, r.Start.Column, tt.line, tt.column)
			}
			if got := src[r.Start.Byte:r.End.Byte]; got != tt.text {
				t.Errorf("covers %q, want %q", got, tt.text)
			}
		})
	}
}
