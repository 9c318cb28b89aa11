package inventory

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// TestJSONRoundTrip: every fixture inventory comes back from its JSON form
// with the same hosts in the same order, the same groups and children and
// every variable's value and type; a marked value keeps its marks.
func TestJSONRoundTrip(t *testing.T) {
	for _, name := range []string{"cluster.ini", "cluster.yml", "cluster.hcl"} {
		t.Run(name, func(t *testing.T) {
			inv, diags := Load(filepath.Join("testdata", name))
			if diags.HasErrors() {
				t.Fatal(diagText(diags))
			}
			h := inv.Hosts[inv.Order[0]]
			h.Vars["secret"] = Var{Value: cty.StringVal("s3cret").Mark("sensitive")}
			j, err := ToJSON(inv)
			if err != nil {
				t.Fatal(err)
			}
			data, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			var back JSON
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			got, err := back.Inventory()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got.Order, ",") != strings.Join(inv.Order, ",") || got.Source != inv.Source {
				t.Fatalf("order %v from %q, want %v from %q", got.Order, got.Source, inv.Order, inv.Source)
			}
			for name, h := range inv.Hosts {
				gh := got.Hosts[name]
				if gh == nil || strings.Join(gh.Groups, ",") != strings.Join(h.Groups, ",") || len(gh.Vars) != len(h.Vars) {
					t.Fatalf("host %s: %+v, want %+v", name, gh, h)
				}
				for v, val := range h.Vars {
					if !gh.Vars[v].Value.RawEquals(val.Value) {
						t.Errorf("host %s: %s = %#v, want %#v", name, v, gh.Vars[v].Value, val.Value)
					}
				}
			}
			for name, g := range inv.Groups {
				gg := got.Groups[name]
				if gg == nil || strings.Join(gg.Hosts, ",") != strings.Join(g.Hosts, ",") || strings.Join(gg.Children, ",") != strings.Join(g.Children, ",") {
					t.Fatalf("group %s: %+v, want %+v", name, gg, g)
				}
				for v, val := range g.Vars {
					if !gg.Vars[v].Value.RawEquals(val.Value) {
						t.Errorf("group %s: %s = %#v, want %#v", name, v, gg.Vars[v].Value, val.Value)
					}
				}
			}
		})
	}
}

// TestJSONRefusesPartialInventories: a JSON inventory that names a host or
// group it does not describe, or lacks "all", is refused, saying which.
func TestJSONRefusesPartialInventories(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "cluster.yml"))
	if err != nil {
		t.Fatal(err)
	}
	inv, diags := ParseYAML("cluster.yml", src)
	if diags.HasErrors() {
		t.Fatal(diagText(diags))
	}
	for _, tc := range []struct {
		name string
		edit func(j *JSON)
		want string
	}{
		{"no all", func(j *JSON) { delete(j.Groups, "all") }, `no group "all"`},
		{"unknown host in order", func(j *JSON) { j.Order = append(j.Order, "ghost") }, `order: host "ghost" is not among the hosts`},
		{"host not in order", func(j *JSON) { j.Order = j.Order[1:] }, "is not in the order"},
		{"unknown child", func(j *JSON) {
			g := j.Groups["all"]
			g.Children = append(g.Children, "ghosts")
			j.Groups["all"] = g
		}, `group all: children: "ghosts" is not described`},
		{"bad value", func(j *JSON) {
			h := j.Hosts[j.Order[0]]
			h.Vars = map[string]JSONVar{"n": {Type: json.RawMessage(`"number"`), Value: json.RawMessage(`"x"`)}}
			j.Hosts[j.Order[0]] = h
		}, "variable n: value:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j, err := ToJSON(inv)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(j)
			_, err = j.Inventory()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
