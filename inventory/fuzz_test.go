package inventory

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

var iniSeeds = []string{
	"",
	"localhost ansible_connection=local\n",
	"[windows]\nwin[01:03]\nwin04 ansible_host=10.0.1.4 label=\"a b\"\n[windows:vars]\nansible_user=Administrator\nansible_connection=winrm\nansible_port=5986\n",
	"[k8s:children]\nlinux\nwindows\n[linux]\ncp01:2222\n[k8s:vars]\nversion = 1.30.2 # pinned\npath='C:\\k'\n",
	"\xEF\xBB\xBF[web]\r\nweb[a:c].corp\r\nn[1:10:3]\r\n; comment\r\n# comment\r\n",
	"[g:children]\ng\n[a:children]\nb\n[b:children]\na\n",
	"[g:bogus]\n[g\nwin[10:01]\nwin[a:5]\nx 'unterminated\n[g:vars]\nnovalue\n",
}

var yamlSeeds = []string{
	"",
	"all:\n  hosts:\n    localhost:\n      ansible_connection: local\n",
	"all:\n  vars:\n    ntp: pool.ntp.org\n  children:\n    windows:\n      hosts:\n        win[01:03]:\n        win04: {ansible_host: 10.0.1.4, port: 5986}\n      vars:\n        ansible_user: Administrator\n        labels: [a, b]\n        extra: {x: 1, y: true, z: ~}\n",
	"k8s:\n  children:\n    linux:\n      hosts: {cp01:2222: }\n    windows:\n      children:\n        gpu: {hosts: {win09: }}\n",
	"all:\n  vars:\n    base: &b {a: 1}\n  children:\n    g:\n      vars:\n        <<: *b\n        c: .nan\n      hosts:\n        h: *b\n",
	`{"all": {"hosts": {"a": null}, "children": {"g": {"hosts": {"a": {"n": 1.5}}}}}}`,
	"all: &x\n  children:\n    g: *x\n",
	"a: &a [*a, *a]\nall:\n  hosts:\n    - bad\n  host:\n  vars: !vault |\n    x\n",
}

var hclSeeds = []string{
	"",
	"host \"localhost\" { connection = \"local\" }\n",
	"group \"windows\" {\n  vars = { connection = \"ssh\", ansible_user = \"Administrator\", port = 22, tofu = true }\n  host \"win01\" { ansible_host = \"10.0.0.11\" }\n  hosts = [\"win[02:10].example.com\", \"web[a:c]\", \"n[1:10:3]\"]\n  children = [\"byoh\"]\n}\ngroup \"byoh\" {}\n",
	"\xEF\xBB\xBF// c\n/* c */\ngroup \"all\" {\n  vars = { l = [1, \"a\", { x = null }], h = <<-EOT\n    x\n  EOT\n  }\n}\n",
	"group \"a\" { children = [\"b\"] }\ngroup \"b\" { children = [\"a\", \"a\", \"all\", \"c\"] }\n",
	"grop \"x\" {}\ngroup \"g\" {\n  chidren = []\n  hosts = [\"w[10:01]\", \"w:22\", 1, \"\"]\n  vars = [1]\n}\nhost \"a\" {\n  vars = {}\n  x = var.y\n  y = f()\n}\n",
	"host \"w\\u0069n[a:5]\" {}\nhost \"x\" {\n",
}

// addSeeds adds the inline seeds plus every file of a kind in testdata, so
// realistic fixtures (and committed crashers) are always re-run.
func addSeeds(f *testing.F, seeds []string, exts ...string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	for _, ext := range exts {
		files, _ := filepath.Glob(filepath.Join("testdata", "*"+ext))
		for _, name := range files {
			if src, err := os.ReadFile(name); err == nil {
				f.Add(src)
			}
		}
	}
}

// checkResult asserts the invariants every parse must keep, valid or not.
func checkResult(t *testing.T, src []byte, inv *Inventory, diags hcl.Diagnostics) {
	if inv == nil || inv.Groups["all"] == nil || inv.Groups["ungrouped"] == nil {
		t.Fatal("inventory or its implicit groups missing")
	}
	for _, d := range diags {
		if d.Subject == nil || d.Summary == "" {
			t.Fatalf("diagnostic without location or summary: %#v", d)
		}
		if d.Subject.Start.Byte < 0 || d.Subject.End.Byte > len(src) || d.Subject.Start.Line < 1 || d.Subject.Start.Column < 1 {
			t.Fatalf("diagnostic range out of bounds: %#v", d.Subject)
		}
	}
	if len(inv.Order) != len(inv.Hosts) {
		t.Fatalf("Order has %d hosts, Hosts %d", len(inv.Order), len(inv.Hosts))
	}
	for i, name := range inv.Order {
		if i == 100 {
			break // HostVars is O(groups) per host; a sample keeps fuzzing fast
		}
		h := inv.Hosts[name]
		if h == nil || len(h.Groups) == 0 {
			t.Fatalf("host %q missing or without groups", name)
		}
		names := inv.GroupNames(name)
		if len(names) == 0 || !contains(names, "all") {
			t.Fatalf("host %q not in all: %v", name, names)
		}
		for _, v := range inv.HostVars(name) {
			if v.Range.Start.Byte < 0 || v.Range.End.Byte > len(src) {
				t.Fatalf("var range out of bounds: %#v", v.Range)
			}
		}
	}
	all, err := inv.Match("all")
	if err != nil || len(all) != len(inv.Order) {
		t.Fatalf("Match(all) = %v, %v", all, err)
	}
	checked := 0
	for _, g := range inv.Groups {
		if checked++; checked > 100 {
			break
		}
		// Parsers refuse group names that patterns could not select.
		if _, err := inv.Match(g.Name); err != nil {
			t.Fatalf("Match(%q): %v", g.Name, err)
		}
	}
}

func FuzzParseINI(f *testing.F) {
	addSeeds(f, iniSeeds, ".ini")
	addAdversarial(f, ".ini")
	f.Fuzz(func(t *testing.T, src []byte) {
		inv, diags := ParseINI("fuzz.ini", src)
		checkResult(t, src, inv, diags)
	})
}

func FuzzParseYAML(f *testing.F) {
	addSeeds(f, yamlSeeds, ".yml")
	addAdversarial(f, ".yml")
	f.Fuzz(func(t *testing.T, src []byte) {
		if len(src) > 64<<10 {
			return // the syntax-error locator is quadratic; inventories are small
		}
		inv, diags := ParseYAML("fuzz.yml", src)
		checkResult(t, src, inv, diags)
	})
}

func FuzzParseHCL(f *testing.F) {
	addSeeds(f, hclSeeds, ".hcl")
	addAdversarial(f, ".hcl")
	f.Fuzz(func(t *testing.T, src []byte) {
		inv, diags := ParseHCL("fuzz.hcl", src)
		checkResult(t, src, inv, diags)
	})
}

// FuzzParseWindowsInstances feeds two ConfigMap entries: every entry must
// become a host or give exactly one error located in the rendered text.
func FuzzParseWindowsInstances(f *testing.F) {
	seeds := [][4]string{
		{"10.0.0.11", "username=Administrator", "win02.example.com", `username=CORP\admin`},
		{"fe80::1", "username=a", "10.0.0.256", "user=a"},
		{"WIN01", "username=a", "win01", " username=b\n"},
		{"", "", "a..b", "username=a,password=b"},
		{"10.0.0.1:22", "Username = x", "-a", "username=\x00"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		data := map[string]string{k1: v1, k2: v2}
		inv, diags := ParseWindowsInstances("k8s://ns/windows-instances", data)
		text := WindowsInstancesText(data)
		checkResult(t, text, inv, diags)
		if len(inv.Order)+len(diags) != len(data) {
			t.Fatalf("%d entries gave %d hosts and %d diagnostics", len(data), len(inv.Order), len(diags))
		}
		for _, d := range diags {
			if d.Subject.Filename != "k8s://ns/windows-instances" || !strings.HasPrefix(d.Detail, "Entry ") {
				t.Fatalf("diagnostic not located at an entry: %#v", d)
			}
		}
		for _, name := range inv.Order {
			vars := inv.HostVars(name)
			if str(vars["ansible_host"].Value) != name || str(vars["ansible_user"].Value) == "" || str(vars["connection"].Value) != "ssh" {
				t.Fatalf("host %q has vars %v", name, varStrings(vars))
			}
			if !contains(inv.Groups["windows"].Hosts, name) {
				t.Fatalf("host %q not in windows", name)
			}
		}
	})
}
