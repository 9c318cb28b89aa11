package inventory

import (
	"testing"

	"github.com/zclconf/go-cty/cty"
)

func TestParseHCL(t *testing.T) {
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
			name: "groups, ranges, host blocks and group vars",
			src: `group "windows" {
  vars = { connection = "ssh", ansible_user = "Administrator" }
  host "win01" { ansible_host = "10.0.0.11" }
  hosts = ["win[02:04].example.com"]
  children = ["byoh"]
}
group "byoh" {
  hosts = ["10.0.0.50"]
}
`,
			order:     []string{"win01", "win02.example.com", "win03.example.com", "win04.example.com", "10.0.0.50"},
			groups:    map[string][]string{"windows": {"win01", "win02.example.com", "win03.example.com", "win04.example.com"}, "byoh": {"10.0.0.50"}, "ungrouped": nil},
			children:  map[string][]string{"windows": {"byoh"}, "all": {"ungrouped", "windows"}},
			hostVars:  map[string]map[string]string{"win01": {"ansible_host": "10.0.0.11"}, "win02.example.com": {}},
			groupVars: map[string]map[string]string{"windows": {"connection": "ssh", "ansible_user": "Administrator"}},
			hostGrps:  map[string][]string{"10.0.0.50": {"byoh"}, "win01": {"windows"}},
		},
		{
			name: "a top-level host block sets variables only; the host is ungrouped unless a group lists it",
			src: `host "jump" { ansible_host = "192.0.2.1" }
host "win[1:3]" { role = "worker" }
host "win2" { role = "ingress" }
group "windows" { hosts = ["win[1:3]"] }
`,
			order:    []string{"jump", "win1", "win2", "win3"},
			groups:   map[string][]string{"ungrouped": {"jump"}, "windows": {"win1", "win2", "win3"}},
			hostVars: map[string]map[string]string{"win1": {"role": "worker"}, "win2": {"role": "ingress"}, "jump": {"ansible_host": "192.0.2.1"}},
			hostGrps: map[string][]string{"jump": {"ungrouped"}, "win2": {"windows"}},
		},
		{
			name: "a host in several groups; children named before they are defined; all with hosts",
			src: `group "all" {
  hosts = ["lone"]
  vars  = { ntp = "pool.ntp.org" }
}
group "k8s" { children = ["linux", "windows"] }
group "windows" {
  host "w1" {}
}
group "gpu" { hosts = ["w1"] }
group "linux" {}
`,
			order:     []string{"lone", "w1"},
			groups:    map[string][]string{"windows": {"w1"}, "gpu": {"w1"}, "linux": nil, "ungrouped": {"lone"}},
			children:  map[string][]string{"k8s": {"linux", "windows"}, "all": {"ungrouped", "k8s", "gpu"}},
			groupVars: map[string]map[string]string{"all": {"ntp": "pool.ntp.org"}},
			hostGrps:  map[string][]string{"w1": {"windows", "gpu"}, "lone": {"ungrouped"}},
		},
		{
			name: "null, empty and quoted keys",
			src: `group "g" {
  vars  = null
  hosts = []
}
group "h" {
  vars = { "with space" = 1, "ansible-dash" = "x" }
}
`,
			groups:    map[string][]string{"g": nil},
			groupVars: map[string]map[string]string{"g": {}, "h": {"with space": "1", "ansible-dash": "x"}},
		},
		{
			name:   "empty and comment-only files",
			src:    "# nothing\n// here\n/* at all */\n",
			groups: map[string][]string{"all": nil, "ungrouped": nil},
		},
		{
			name:     "byte order mark",
			src:      "\xEF\xBB\xBFhost \"a\" { x = 1 }\n",
			order:    []string{"a"},
			hostVars: map[string]map[string]string{"a": {"x": "1"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := parse(t, "hcl", tt.src)
			if tt.order != nil {
				equal(t, "order", inv.Order, tt.order)
			}
			checkInventory(t, inv, tt.groups, tt.children, tt.hostVars, tt.groupVars, tt.hostGrps)
		})
	}
}

func TestHCLValueTypes(t *testing.T) {
	inv := parse(t, "hcl", `host "h" {
  s        = "text"
  n        = 5986
  f        = 1.25
  yes      = true
  nul      = null
  list     = ["a", 1, true]
  empty    = []
  obj      = { k = "v", nested = { x = [1] } }
  heredoc  = <<-EOT
    line1
    line2
  EOT
  template = "C:\\k\\${"bin"}"
  path     = "C:\\var\\lib\\kubelet"
}
`)
	vars := inv.Hosts["h"].Vars
	tests := []struct {
		key  string
		want cty.Value
	}{
		{"s", cty.StringVal("text")},
		{"n", cty.NumberIntVal(5986)},
		{"f", cty.NumberFloatVal(1.25)},
		{"yes", cty.True},
		{"nul", cty.NullVal(cty.DynamicPseudoType)},
		{"list", cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.NumberIntVal(1), cty.True})},
		{"empty", cty.EmptyTupleVal},
		{"obj", cty.ObjectVal(map[string]cty.Value{
			"k":      cty.StringVal("v"),
			"nested": cty.ObjectVal(map[string]cty.Value{"x": cty.TupleVal([]cty.Value{cty.NumberIntVal(1)})}),
		})},
		{"heredoc", cty.StringVal("line1\nline2\n")},
		{"template", cty.StringVal(`C:\k\bin`)},
		{"path", cty.StringVal(`C:\var\lib\kubelet`)},
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

func TestHCLVarRanges(t *testing.T) {
	src := "group \"g\" {\n" +
		"  vars = { user = \"admin\", list = [1, 2] }\n" +
		"  host \"w\xc3\xa9b1\" {\n" +
		"    port = 22\n" +
		"  }\n" +
		"}\n"
	inv := parse(t, "hcl", src)
	tests := []struct {
		key          string
		v            Var
		line, column int
		text         string
	}{
		{"user", inv.Groups["g"].Vars["user"], 2, 19, `"admin"`},
		{"list", inv.Groups["g"].Vars["list"], 2, 35, "[1, 2]"},
		{"port", inv.Hosts["wéb1"].Vars["port"], 4, 12, "22"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			r := tt.v.Range
			if r.Filename != "inv.hcl" || r.Start.Line != tt.line || r.Start.Column != tt.column {
				t.Errorf("at %s:%d:%d, want %d:%d", r.Filename, r.Start.Line, r.Start.Column, tt.line, tt.column)
			}
			if got := src[r.Start.Byte:r.End.Byte]; got != tt.text {
				t.Errorf("covers %q, want %q", got, tt.text)
			}
		})
	}
	if r := inv.Hosts["wéb1"].Range; r.Start.Line != 3 || r.Start.Column != 8 {
		t.Errorf("host range %d:%d, want 3:8", r.Start.Line, r.Start.Column)
	}
}
