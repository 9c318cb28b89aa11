package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func loadFixture(t *testing.T, name string) *Inventory {
	t.Helper()
	inv, diags := Load(filepath.Join("testdata", name))
	if diags.HasErrors() {
		t.Fatalf("%s:\n%s", name, diagText(diags))
	}
	return inv
}

// The INI, YAML and HCL fixtures describe the same cluster, so everything a
// playbook can observe must agree (YAML and HCL numbers compare by their
// text).
func TestFixturesAgree(t *testing.T) {
	ini := loadFixture(t, "cluster.ini")
	equal(t, "order", ini.Order, []string{"cp01", "win01", "win02", "win03", "win04"})
	for _, fixture := range []string{"cluster.yml", "cluster.hcl"} {
		t.Run(fixture, func(t *testing.T) {
			other := loadFixture(t, fixture)
			equal(t, "order", other.Order, ini.Order)
			equal(t, "group names", sorted(mapKeys(other.Groups)), sorted(mapKeys(ini.Groups)))
			for name, g := range ini.Groups {
				o := other.Groups[name]
				equal(t, name+" hosts", sorted(o.Hosts), sorted(g.Hosts))
				equal(t, name+" children", sorted(o.Children), sorted(g.Children))
				equal(t, name+" vars", varStrings(o.Vars), varStrings(g.Vars))
			}
			for _, h := range ini.Order {
				equal(t, h+" groups", other.Hosts[h].Groups, ini.Hosts[h].Groups)
				equal(t, h+" group names", other.GroupNames(h), ini.GroupNames(h))
				equal(t, h+" hostvars", varStrings(other.HostVars(h)), varStrings(ini.HostVars(h)))
			}
			for _, pat := range []string{"all", "windows", "linux:&k8s_cluster", "k8s_cluster:!gpu", "win0?", "~cp"} {
				a, errA := ini.Match(pat)
				b, errB := other.Match(pat)
				if errA != nil || errB != nil {
					t.Fatalf("%s: %v / %v", pat, errA, errB)
				}
				equal(t, "match "+pat, b, a)
			}
		})
	}
}

func TestFixtureHostVars(t *testing.T) {
	inv := loadFixture(t, "cluster.ini")
	equal(t, "win04", varStrings(inv.HostVars("win04")), map[string]string{
		"ntp_server":                           "pool.ntp.org",
		"ansible_user":                         "Administrator", // windows (depth 2) beats all
		"k8s_version":                          "1.30.2",
		"cni":                                  "flannel",
		"ansible_connection":                   "winrm",
		"ansible_winrm_transport":              "ntlm",
		"ansible_port":                         "5986",
		"ansible_winrm_server_cert_validation": "ignore",
		"kubelet_root":                         `C:\var\lib\kubelet`,
		"ansible_host":                         "10.0.1.4",
		"k8s_node_labels":                      "role=gpu,zone=b",
		"gpu_driver":                           "535.104",
	})
	equal(t, "cp01 user", str(inv.HostVars("cp01")["ansible_user"].Value), "ubuntu")
	equal(t, "win04 groups", inv.GroupNames("win04"), []string{"all", "gpu", "k8s_cluster", "windows"})
	equal(t, "cp01 groups", inv.GroupNames("cp01"), []string{"all", "control_plane", "k8s_cluster", "linux"})
	equal(t, "all children", sorted(inv.Groups["all"].Children), []string{"gpu", "k8s_cluster", "ungrouped"})
	equal(t, "ungrouped", inv.Groups["ungrouped"].Hosts, []string(nil))

	// Ranges point at the value in the file.
	r := inv.HostVars("win04")["k8s_node_labels"].Range
	equal(t, "range", [3]int{r.Start.Line, r.Start.Column, r.Start.Byte}, [3]int{12, 45, indexOf(t, "cluster.ini", `"role=gpu`)})
	yr := loadFixture(t, "cluster.yml").HostVars("win04")["ansible_port"].Range
	equal(t, "yaml range", [3]int{yr.Start.Line, yr.Start.Column, yr.Start.Byte}, [3]int{30, 27, indexOf(t, "cluster.yml", "5986")})
	equal(t, "yaml range end", yr.End.Column, 31)
	hr := loadFixture(t, "cluster.hcl").HostVars("win04")["ansible_port"].Range
	equal(t, "hcl range", [3]int{hr.Start.Line, hr.Start.Column, hr.Start.Byte}, [3]int{43, 44, indexOf(t, "cluster.hcl", "5986")})
	equal(t, "hcl range end", hr.End.Column, 48)
	// A host listed by a range points at the list element.
	lr := loadFixture(t, "cluster.hcl").Hosts["win02"].Range
	equal(t, "hcl host range", [2]int{lr.Start.Line, lr.Start.Column}, [2]int{31, 12})
}

func indexOf(t *testing.T, fixture, s string) int {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(src), s)
	if i < 0 {
		t.Fatalf("%q not in %s", s, fixture)
	}
	return i
}

func mapKeys[V any](m map[string]V) []string { return sortedKeys(m) }

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name      string
		arg       string
		wantHosts []string
		wantErr   string
		wantFile  bool
	}{
		{name: "ini by content", arg: write("hosts", "[windows]\nwin01\n"), wantHosts: []string{"win01"}, wantFile: true},
		{name: "yaml by content", arg: write("inventory", "# cluster\nall:\n  hosts:\n    win01:\n"), wantHosts: []string{"win01"}, wantFile: true},
		{name: "yaml document marker", arg: write("inv2", "---\nwindows:\n  hosts: {w1: }\n"), wantHosts: []string{"w1"}, wantFile: true},
		{name: "ini host with port", arg: write("inv3", "win01:5986\n"), wantHosts: []string{"win01"}, wantFile: true},
		{name: "yaml by extension", arg: write("x.yaml", "all: {hosts: {a: , b: }}"), wantHosts: []string{"a", "b"}, wantFile: true},
		{name: "json is yaml", arg: write("x.json", `{"all": {"hosts": {"a": null}}}`), wantHosts: []string{"a"}, wantFile: true},
		{name: "inline list", arg: "win01, win02,", wantHosts: []string{"win01", "win02"}},
		{name: "single inline host", arg: "localhost,", wantHosts: []string{"localhost"}},
		{name: "missing file", arg: filepath.Join(dir, "nope"), wantErr: "Inventory not found"},
		{name: "directory", arg: dir, wantErr: "Inventory is a directory"},
		{name: "hcl by extension", arg: write("inventory.wsu.hcl", "host \"a\" {}\n"), wantHosts: []string{"a"}, wantFile: true},
		{name: "hcl by content", arg: write("inv4", "# wsu\ngroup \"windows\" {\n  hosts = [\"w[1:2]\"]\n}\n"), wantHosts: []string{"w1", "w2"}, wantFile: true},
		{name: "hcl comment first", arg: write("inv5", "// wsu\n/* x */\nhost \"b\" { x = 1 }\n"), wantHosts: []string{"b"}, wantFile: true},
		{name: "ini host named group", arg: write("inv6", "group ansible_host=10.0.0.1\n"), wantHosts: []string{"group"}, wantFile: true},
		{name: "fixture hcl", arg: "testdata/cluster.hcl", wantHosts: []string{"cp01", "win01", "win02", "win03", "win04"}, wantFile: true},
		{name: "fixture", arg: "testdata/cluster.yml", wantHosts: []string{"cp01", "win01", "win02", "win03", "win04"}, wantFile: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, diags := Load(tt.arg)
			if tt.wantErr != "" {
				if !diags.HasErrors() || !strings.Contains(diags[0].Summary, tt.wantErr) {
					t.Fatalf("want error %q, got %s", tt.wantErr, diagText(diags))
				}
				return
			}
			if diags.HasErrors() {
				t.Fatal(diagText(diags))
			}
			equal(t, "hosts", inv.Order, tt.wantHosts)
			if tt.wantFile != (inv.Source != "") {
				t.Errorf("Source = %q", inv.Source)
			}
		})
	}
}

func TestFromList(t *testing.T) {
	tests := []struct {
		list  string
		hosts []string
		port  string
	}{
		{"localhost,", []string{"localhost"}, ""},
		{"win01,win02,win01", []string{"win01", "win02"}, ""},
		{" a , ,b,", []string{"a", "b"}, ""},
		{"win01:5986,", []string{"win01"}, "5986"},
		{",", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.list, func(t *testing.T) {
			inv := FromList(tt.list)
			equal(t, "order", inv.Order, tt.hosts)
			equal(t, "ungrouped", inv.Groups["ungrouped"].Hosts, tt.hosts)
			if inv.Source != "" || inv.Groups["all"] == nil {
				t.Errorf("bad inventory %+v", inv)
			}
			if tt.port != "" {
				equal(t, "port", str(inv.HostVars(tt.hosts[0])["ansible_port"].Value), tt.port)
			}
		})
	}
}
