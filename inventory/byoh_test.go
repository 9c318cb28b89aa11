package inventory

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"gopkg.in/yaml.v3"
)

var update = flag.Bool("update", false, "rewrite golden files")

const wiSource = "k8s://wmco/windows-instances"

// configMapData reads the data of a ConfigMap manifest in testdata.
func configMapData(t *testing.T, name string) map[string]string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(src, &cm); err != nil {
		t.Fatal(err)
	}
	return cm.Data
}

func TestParseWindowsInstancesFixture(t *testing.T) {
	inv, diags := ParseWindowsInstances(wiSource, configMapData(t, "windows-instances.yaml"))
	if len(diags) > 0 {
		t.Fatal(diagText(diags))
	}
	equal(t, "source", inv.Source, wiSource)
	equal(t, "order", inv.Order, []string{"10.0.0.11", "10.0.0.12", "win03.example.com"})
	equal(t, "windows", inv.Groups["windows"].Hosts, inv.Order)
	equal(t, "group vars", varStrings(inv.Groups["windows"].Vars), map[string]string{"connection": "ssh"})
	equal(t, "win03", varStrings(inv.HostVars("win03.example.com")), map[string]string{
		"ansible_host": "win03.example.com", "ansible_user": `CORP\wsu-admin`, "connection": "ssh",
	})
	equal(t, "groups", inv.GroupNames("10.0.0.12"), []string{"all", "windows"})
	got, err := inv.Match("windows")
	if err != nil {
		t.Fatal(err)
	}
	equal(t, "match", got, inv.Order)

	// Vars point at their entry in the rendered text.
	text := string(WindowsInstancesText(configMapData(t, "windows-instances.yaml")))
	r := inv.Hosts["10.0.0.12"].Vars["ansible_user"].Range
	equal(t, "user range", [3]any{r.Filename, r.Start.Line, text[r.Start.Byte:r.End.Byte]}, [3]any{wiSource, 2, "username=Administrator"})
	r = inv.Hosts["10.0.0.12"].Vars["ansible_host"].Range
	equal(t, "host range", [3]any{r.Start.Line, r.Start.Column, text[r.Start.Byte:r.End.Byte]}, [3]any{2, 1, "10.0.0.12"})
}

func TestParseWindowsInstances(t *testing.T) {
	tests := []struct {
		name  string
		data  map[string]string
		hosts []string
		user  string // ansible_user of the first host
	}{
		{"empty data: no hosts", map[string]string{}, nil, ""},
		{"nil data: no hosts", nil, nil, ""},
		{"IPv4", map[string]string{"192.168.1.20": "username=Administrator"}, []string{"192.168.1.20"}, "Administrator"},
		{"DNS name", map[string]string{"Win01.Corp.example": "username=admin"}, []string{"Win01.Corp.example"}, "admin"},
		{"single label", map[string]string{"win01": "username=admin"}, []string{"win01"}, "admin"},
		{"numeric labels with a name", map[string]string{"10.0.0.1a": "username=a"}, []string{"10.0.0.1a"}, "a"},
		{"spaces around the value", map[string]string{"win01": " username=admin\n"}, []string{"win01"}, "admin"},
		{"domain and UPN users", map[string]string{"a": `username=CORP\admin`, "b": "username=admin@corp.example"}, []string{"a", "b"}, `CORP\admin`},
		{"hosts in key order", map[string]string{"b": "username=x", "a": "username=y", "10.0.0.2": "username=z"}, []string{"10.0.0.2", "a", "b"}, "z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, diags := ParseWindowsInstances(wiSource, tt.data)
			if len(diags) > 0 {
				t.Fatal(diagText(diags))
			}
			equal(t, "hosts", inv.Order, tt.hosts)
			if inv.Groups["windows"] == nil {
				t.Fatal("group windows missing even without hosts")
			}
			if len(tt.hosts) > 0 {
				equal(t, "user", str(inv.HostVars(tt.hosts[0])["ansible_user"].Value), tt.user)
				equal(t, "connection", str(inv.HostVars(tt.hosts[0])["connection"].Value), "ssh")
			}
		})
	}
}

// Each bad entry gives one error, located at the entry, naming it; the good
// entries still load.
func TestWindowsInstancesDiagnostics(t *testing.T) {
	tests := []struct {
		name, key, value string
		detail           string // substring of the Detail
		at               string // the text the Subject covers
	}{
		{"IPv6", "fe80::1", "username=a", "it is an IPv6 address, which BYOH does not support", "fe80::1"},
		{"bracketed IPv6", "[2001:db8::1]", "username=a", "IPv6 address", "[2001:db8::1]"},
		{"port", "10.0.0.1:22", "username=a", "contains ':'", "10.0.0.1:22"},
		{"bad IPv4", "10.0.0.256", "username=a", "not a valid IPv4 address", "10.0.0.256"},
		{"leading zero IPv4", "10.0.0.01", "username=a", "not a valid IPv4 address", "10.0.0.01"},
		{"three numbers", "10.0.1", "username=a", "not a valid IPv4 address", "10.0.1"},
		{"empty label", "win01..corp", "username=a", "empty label", "win01..corp"},
		{"trailing dot", "win01.corp.", "username=a", "empty label", "win01.corp."},
		{"hyphen", "-win01", "username=a", `the label "-win01" starts or ends with '-'`, "-win01"},
		{"underscore", "win_01", "username=a", `contains '_'`, "win_01"},
		{"long label", strings.Repeat("a", 64), "username=a", "at most 63", strings.Repeat("a", 64)},
		{"long name", strings.Repeat("a.", 127) + "ab", "username=a", "at most 253", strings.Repeat("a.", 127) + "ab"},
		{"empty key", "", "username=a", "the key is empty", `""`},
		{"empty value", "win01", "", "the value is empty", `""`},
		{"other key", "win01", "user=admin", `Did you mean "username"?`, "user=admin"},
		{"capitalised", "win01", "Username=admin", "write it as username=admin", "Username=admin"},
		{"spaced", "win01", "username = admin", "write it as username=admin", `username = admin`},
		{"no key", "win01", "admin", "put username= before", "admin"},
		{"unknown key", "win01", "password=x", "the only key", "password=x"},
		{"empty user", "win01", "username=", "empty", "username="},
		{"second key", "win01", "username=admin,password=x", "contains ','", "username=admin,password=x"},
		{"second key spaced", "win01", "username=admin password=x", "contains a space", "username=admin password=x"},
		{"two lines", "win01", "username=admin\nusername=b", "space or control character", `"username=admin\nusername=b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := map[string]string{tt.key: tt.value, "10.9.9.9": "username=ok"}
			inv, diags := ParseWindowsInstances(wiSource, data)
			if len(diags) != 1 || diags[0].Severity != hcl.DiagError {
				t.Fatalf("want one error, got:\n%s", diagText(diags))
			}
			d := diags[0]
			if d.Summary != "Invalid windows-instances entry" || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("got %s: %s\nwant detail ~%q", d.Summary, d.Detail, tt.detail)
			}
			if !strings.HasPrefix(d.Detail, fmt.Sprintf("Entry %q: ", tt.key)) {
				t.Errorf("detail does not name the entry %q: %s", tt.key, d.Detail)
			}
			text := WindowsInstancesText(data)
			if d.Subject == nil || d.Subject.Filename != wiSource {
				t.Fatalf("subject %#v", d.Subject)
			}
			if got := string(text[d.Subject.Start.Byte:d.Subject.End.Byte]); got != tt.at {
				t.Errorf("subject covers %q, want %q", got, tt.at)
			}
			equal(t, "good entry still loads", inv.Order, []string{"10.9.9.9"})
		})
	}
}

func TestWindowsInstancesDuplicateSpelling(t *testing.T) {
	inv, diags := ParseWindowsInstances(wiSource, map[string]string{"WIN01.corp": "username=a", "win01.corp": "username=b"})
	if len(diags) != 1 || !strings.Contains(diags[0].Detail, `Entry "win01.corp" names the same host as entry "WIN01.corp"`) {
		t.Fatalf("got:\n%s", diagText(diags))
	}
	equal(t, "hosts", inv.Order, []string{"WIN01.corp"})
}

// The rendered diagnostics for a ConfigMap with every kind of mistake, as
// the CLI prints them: located at the entry, quoting it.
func TestWindowsInstancesGolden(t *testing.T) {
	data := configMapData(t, "windows-instances-bad.yaml")
	inv, diags := ParseWindowsInstances(wiSource, data)
	var out bytes.Buffer
	files := map[string]*hcl.File{wiSource: {Bytes: WindowsInstancesText(data)}}
	if err := hcl.NewDiagnosticTextWriter(&out, files, 100, false).WriteDiagnostics(diags); err != nil {
		t.Fatal(err)
	}
	out.WriteString("hosts: " + strings.Join(inv.Order, " ") + "\n")
	golden := filepath.Join("testdata", "windows-instances-bad.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./inventory -run Golden -update writes it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("diagnostics differ from %s (-update rewrites it):\n%s", golden, out.String())
	}
}
