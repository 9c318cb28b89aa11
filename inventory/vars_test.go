package inventory

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// Ansible merges: all < groups by depth (parents first), then by
// ansible_group_priority, then by name < host.
func TestHostVarsPrecedence(t *testing.T) {
	tests := []struct {
		name   string
		format string
		src    string
		host   string
		want   map[string]string
	}{
		{
			name: "host beats group beats all",
			src:  "[all:vars]\nx=all\ny=all\nz=all\n[g]\nh x=host\n[g:vars]\nx=g\ny=g\n",
			host: "h",
			want: map[string]string{"x": "host", "y": "g", "z": "all"},
		},
		{
			name: "child group beats parent, whatever the order in the file",
			src:  "[child]\nh\n[child:vars]\nx=child\n[parent:children]\nchild\n[parent:vars]\nx=parent\ny=parent\n",
			host: "h",
			want: map[string]string{"x": "child", "y": "parent"},
		},
		{
			name: "same depth: alphabetical, later name wins",
			src:  "[zeta]\nh\n[alpha]\nh\n[zeta:vars]\nx=zeta\n[alpha:vars]\nx=alpha\ny=alpha\n",
			host: "h",
			want: map[string]string{"x": "zeta", "y": "alpha"},
		},
		{
			name: "depth is the longest path from all",
			// b is reached as top>a>b (depth 3) and top2>b (depth 2); the
			// longest path counts, so b (3) beats c (2) despite the name.
			src:  "[top:children]\na\nc\n[a:children]\nb\n[top2:children]\nb\n[b]\nh\n[c]\nh\n[b:vars]\nx=b\n[c:vars]\nx=c\n",
			host: "h",
			want: map[string]string{"x": "b"},
		},
		{
			name: "ansible_group_priority reorders groups of the same depth",
			src:  "[zeta]\nh\n[alpha]\nh\n[zeta:vars]\nx=zeta\n[alpha:vars]\nx=alpha\nansible_group_priority=10\n",
			host: "h",
			want: map[string]string{"x": "alpha", "ansible_group_priority": "10"},
		},
		{
			name:   "yaml: same rules, numbers stay numbers",
			format: "yaml",
			src: `all:
  vars: {x: all, n: 1}
  children:
    parent:
      vars: {x: parent, n: 2}
      children:
        child:
          hosts: {h: {n: 4}}
          vars: {x: child}
`,
			host: "h",
			want: map[string]string{"x": "child", "n": "4"},
		},
		{
			name: "unknown host",
			src:  "h\n",
			host: "nope",
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := parse(t, tt.format, tt.src)
			got := inv.HostVars(tt.host)
			if tt.want == nil {
				if got != nil {
					t.Fatalf("want nil, got %v", got)
				}
				return
			}
			equal(t, "vars", varStrings(got), tt.want)
		})
	}
}

func TestHostVarsKeepRanges(t *testing.T) {
	inv := parse(t, "ini", "[g]\nh\n[g:vars]\nx=1\n")
	r := inv.HostVars("h")["x"].Range
	if r.Filename != "inv.ini" || r.Start.Line != 4 || r.Start.Column != 3 {
		t.Errorf("range %#v", r)
	}
}

func TestGroupNames(t *testing.T) {
	inv := parse(t, "ini", matchINI)
	tests := []struct {
		host string
		want []string
	}{
		{"bastion", []string{"all", "ungrouped"}},
		{"win03", []string{"all", "gpu", "k8s", "windows"}},
		{"lnx01", []string{"all", "k8s", "linux", "staging"}},
		{"nope", nil},
	}
	for _, tt := range tests {
		equal(t, tt.host, inv.GroupNames(tt.host), tt.want)
	}
}

// A hand-built Inventory (as other packages' tests may create) must work,
// even with a cycle the parsers would have rejected.
func TestHandBuiltInventory(t *testing.T) {
	v := func(s string) Var { return Var{Value: cty.StringVal(s), Range: hcl.Range{}} }
	inv := &Inventory{
		Hosts: map[string]*Host{"h": {Name: "h", Vars: map[string]Var{}, Groups: []string{"a"}}},
		Groups: map[string]*Group{
			"all": {Name: "all", Vars: map[string]Var{"x": v("all")}},
			"a":   {Name: "a", Hosts: []string{"h"}, Children: []string{"b"}, Vars: map[string]Var{"x": v("a")}},
			"b":   {Name: "b", Children: []string{"a"}, Vars: map[string]Var{"y": v("b")}},
		},
	}
	equal(t, "groups", inv.GroupNames("h"), []string{"a", "all", "b"})
	got, err := inv.Match("b")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "match", got, []string{"h"})
	vars := varStrings(inv.HostVars("h"))
	if vars["y"] != "b" || vars["x"] == "all" {
		t.Errorf("vars %v", vars)
	}
}
