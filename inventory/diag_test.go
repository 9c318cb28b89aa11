package inventory

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// Each bad input must give an error whose Subject points at the mistake.
func TestDiagnostics(t *testing.T) {
	tests := []struct {
		name    string
		format  string
		src     string
		summary string // substring of the first error's Summary
		detail  string // substring of its Detail
		at      string // "line:col" of the Subject start
	}{
		// INI
		{"reversed range", "ini", "[windows]\nwin[10:01]\n", "Invalid host range", "counts down", "2:4"},
		{"mixed range", "ini", "[windows]\n  win[a:5] x=1\n", "Invalid host range", "numbers (win[01:10]) or single letters", "2:6"},
		{"unequal padding", "ini", "win[01:100]\n", "Invalid host range", "same width", "1:4"},
		{"zero step", "ini", "win[1:9:0]\n", "Invalid host range step", "positive", "1:4"},
		{"unterminated range", "ini", "\nwin[1:3 a=b\n", "Unterminated host range", "closing ']'", "2:4"},
		{"huge range", "ini", "w[0:999999]\n", "Host range too large", "more than", "1:2"},
		{"bad port", "ini", "win01:winrm\n", "Invalid port", "port number", "1:6"},
		{"unterminated section", "ini", "[windows]\nwin01\n[windows:vars\nx=1\n", "Unterminated section header", "must end with ']'", "3:1"},
		{"unknown section suffix", "ini", "[g]\nh\n[g:foo]\n", "Unknown section type", "vars, children or hosts", "3:4"},
		{"misspelt section suffix", "ini", "[g]\n[g:chidlren]\n", "Unknown section type", "Did you mean [g:children]?", "2:4"},
		{"text after section", "ini", "[g] extra\n", "Unexpected text after section header", "comment", "1:5"},
		{"bad group name", "ini", "[my group]\n", "Invalid group name", "space", "1:1"},
		{"vars key without =", "ini", "[g]\nh\n[g:vars]\nansible_user\n", "Expected key=value", "[g:vars]", "4:1"},
		{"vars missing name", "ini", "[g]\n[g:vars]\n  =x\n", "Missing variable name", "before '='", "3:3"},
		{"vars name with space", "ini", "[g]\n[g:vars]\nmy var=x\n", "Invalid variable name", "spaces", "3:1"},
		{"vars unterminated quote", "ini", "[g]\n[g:vars]\npass=\"abc\n", "Unterminated quoted string", "no closing", "3:6"},
		{"vars text after quote", "ini", "[g]\n[g:vars]\nx='a' b\n", "Unexpected text after quoted value", `"b"`, "3:7"},
		{"host unterminated quote", "ini", "[g]\nwin01 a=1 label='x y\n", "Unterminated quoted string", "no closing", "2:17"},
		{"host var without =", "ini", "win01 ansible_host\n", "Expected key=value", "key=value", "1:7"},
		{"host var spaced =", "ini", "win01 ansible_host = 1.2.3.4\n", "Expected key=value", "Remove the spaces", "1:7"},
		{"variable where host expected", "ini", "[windows]\nansible_user=admin\n", "Expected a host name", "[windows:vars]", "2:1"},
		{"vars for undefined group", "ini", "[windows]\nw\n[windwos:vars]\nx=1\n", "Vars for undefined group", `Did you mean "windows"?`, "3:2"},
		{"child all", "ini", "[g:children]\nall\n", "Invalid child group", "every group", "2:1"},
		{"child extra text", "ini", "[g:children]\n a b\n", "Unexpected text after group name", "one child group", "2:4"},
		{"self child", "ini", "[g:children]\ng\n", "Group is its own ancestor", "g -> g", "2:1"},
		{"cycle", "ini", "[a:children]\nb\n[b:children]\nc\n[c:children]\n  a\n", "Group is its own ancestor", "a -> b -> c -> a", "6:3"},
		{"glob in host name", "ini", "[g]\n  web* a=1\n", "Invalid host name", "host patterns", "2:3"},
		{"colon in group name", "ini", "[a:b:c]\n", "Unknown section type", "b:c", "1:4"},
		{"control char in group", "ini", "[a\x01]\n", "Invalid group name", "control", "1:1"},
		{"invalid utf8", "ini", "[g]\nh x=\xff\n", "Invalid UTF-8", "UTF-8", "2:5"},

		// YAML syntax, located by re-parsing prefixes
		{"yaml bad indentation", "yaml", "all:\n  hosts:\n    win01:\n   bad: x\n", "Invalid YAML", "indentation", "4:4"},
		{"yaml nested mapping value", "yaml", "all:\n  hosts:\n    a: b: c\n", "Invalid YAML", "mapping values are not allowed", "3:9"},
		{"yaml unterminated quote", "yaml", "all:\n  vars:\n    a: 'x\n    b: 2\n", "Invalid YAML", "end of stream", "3:8"},
		{"yaml tab indent", "yaml", "all:\n\thosts:\n", "Invalid YAML", "not tabs", "2:1"},
		{"yaml unknown anchor", "yaml", "all:\n  hosts:\n    a: *nope\n", "Invalid YAML", "unknown anchor", "3:8"},
		{"yaml unclosed flow", "yaml", "all:\n  hosts: [a\n", "Invalid YAML", "expected ',' or ']'", "2:11"},

		// YAML shape
		{"yaml hosts list", "yaml", "all:\n  hosts:\n    - win01\n", "Hosts must be a mapping", "not a list", "3:5"},
		{"yaml hosts scalar", "yaml", "all:\n  hosts: win01\n", "Hosts must be a mapping", `single value ("win01")`, "2:10"},
		{"yaml children list", "yaml", "all:\n  children: [windows]\n", "Children must be a mapping", "not a list", "2:13"},
		{"yaml vars list", "yaml", "all:\n  vars:\n  - a\n", "Variables must be a mapping", "not a list", "3:3"},
		{"yaml host vars scalar", "yaml", "all:\n  hosts:\n    win01: 10.0.0.1\n", "Variables must be a mapping", `"win01"`, "3:12"},
		{"yaml group scalar", "yaml", "all:\n  children:\n    windows: win01\n", "Group must be a mapping", "windows", "3:14"},
		{"yaml top level list", "yaml", "- all\n", "Inventory must be a mapping", "top level", "1:1"},
		{"yaml host directly under group", "yaml", "windows:\n  win01:\n", "Unexpected key in group", "hosts:", "2:3"},
		{"yaml misspelt key", "yaml", "all:\n  host:\n    a:\n", "Unexpected key in group", `Did you mean "hosts"?`, "2:3"},
		{"yaml duplicate host", "yaml", "all:\n  hosts:\n    a:\n    a:\n", "Duplicate key", "line 3", "4:5"},
		{"yaml duplicate var", "yaml", "all:\n  vars: {x: 1, x: 2}\n", "Duplicate key", "unique", "2:16"},
		{"yaml bad range", "yaml", "all:\n  hosts:\n    win[10:01]:\n", "Invalid host range", "counts down", "3:8"},
		{"yaml bad range quoted", "yaml", "all:\n  hosts:\n    \"win[a:5]\":\n", "Invalid host range", "single letters", "3:5"},
		{"yaml cycle", "yaml", "a:\n  children:\n    b:\n      children:\n        a:\n", "Group is its own ancestor", "a -> b -> a", "5:9"},
		{"yaml all as child", "yaml", "g:\n  children:\n    all:\n", "Invalid child group", "every group", "3:5"},
		{"yaml recursive alias", "yaml", "all: &x\n  children:\n    g: *x\n", "Recursive YAML alias", "*x", "3:8"},
		{"yaml complex key", "yaml", "all:\n  hosts:\n    [a, b]: \n", "Invalid host name", "plain string", "3:5"},
		{"yaml empty host name", "yaml", "all:\n  hosts:\n    '': \n", "Invalid host name", "empty", "3:5"},
		{"yaml space in host", "yaml", "all:\n  hosts:\n    'a b':\n", "Invalid host name", "space", "3:5"},
		{"yaml comma in group", "yaml", "all:\n  children:\n    a,b:\n", "Invalid group name", "host patterns", "3:5"},
		{"yaml vault", "yaml", "all:\n  vars:\n    pw: !vault |\n      $ANSIBLE_VAULT;1.1;AES256\n", "Vault values are not supported", "ansible-vault", "3:9"},
		{"yaml custom tag", "yaml", "all:\n  vars:\n    x: !foo bar\n", "Unsupported YAML tag", "!foo", "3:8"},
		{"yaml bad explicit int", "yaml", "all:\n  vars:\n    x: !!int abc\n", "Invalid number", "abc", "3:8"},
		{"yaml plugin config", "yaml", "plugin: aws_ec2\n", "Inventory plugins are not supported", "static", "1:1"},
		{"yaml invalid merge", "yaml", "all:\n  vars:\n    <<: 3\n", "Invalid merge", "mapping", "3:9"},

		// HCL: HCL's own diagnostics (with its "did you mean") and the model's
		{"hcl misspelt block", "hcl", "grop \"windows\" {}\n", "Unsupported block type", `Did you mean "group"?`, "1:1"},
		{"hcl misspelt attribute", "hcl", "group \"g\" {\n  chidren = []\n}\n", "Unsupported argument", `Did you mean "children"?`, "2:3"},
		{"hcl vars as block", "hcl", "group \"g\" {\n  vars {\n  }\n}\n", "Unsupported block type", "equals sign", "2:3"},
		{"hcl top-level vars", "hcl", "vars = {}\n", "Unsupported argument", `group "all"`, "1:1"},
		{"hcl syntax error", "hcl", "group \"g\" {\n  hosts = [\"a\"\n}\n", "Missing item separator", "comma", "3:1"},
		{"hcl duplicate host in list", "hcl", "group \"g\" {\n  hosts = [\"a\", \"b\", \"a\"]\n}\n", "Duplicate host in group", "(line 2, column 12)", "2:22"},
		{"hcl duplicate host through range", "hcl", "group \"g\" {\n  hosts = [\"w[1:3]\"]\n  host \"w2\" {}\n}\n", "Duplicate host in group", `"w2" is already in group "g"`, "3:8"},
		{"hcl bad range in list", "hcl", "group \"g\" {\n  hosts = [\"win[10:01]\"]\n}\n", "Invalid host range", "counts down", "2:16"},
		{"hcl bad range in label", "hcl", "host \"win[a:5]\" {}\n", "Invalid host range", "single letters", "1:10"},
		{"hcl bad range escaped", "hcl", "host \"w\\u0069n[a:5]\" {}\n", "Invalid host range", "single letters", "1:6"},
		{"hcl unterminated range", "hcl", "group \"g\" {\n  hosts = [\"w[1:3\"]\n}\n", "Unterminated host range", "closing ']'", "2:14"},
		{"hcl port in host", "hcl", "group \"g\" {\n  hosts = [\"win01:5986\"]\n}\n", "Port in host name", "ansible_port = 5986", "2:18"},
		{"hcl glob in host", "hcl", "host \"web*\" {}\n", "Invalid host name", "host patterns", "1:6"},
		{"hcl empty host", "hcl", "group \"g\" {\n  hosts = [\"\"]\n}\n", "Invalid host name", "empty", "2:12"},
		{"hcl non-string host", "hcl", "group \"g\" {\n  hosts = [1]\n}\n", "Invalid host name", "must be a string", "2:12"},
		{"hcl hosts not a list", "hcl", "group \"g\" {\n  hosts = \"a\"\n}\n", "Invalid hosts", "list of host names", "2:11"},
		{"hcl cycle", "hcl", "group \"a\" {\n  children = [\"b\"]\n}\ngroup \"b\" {\n  children = [\"a\"]\n}\n", "Group is its own ancestor", "a -> b -> a", "5:15"},
		{"hcl self child", "hcl", "group \"g\" {\n  children = [\"g\"]\n}\n", "Group is its own ancestor", "g -> g", "2:15"},
		{"hcl unknown child", "hcl", "group \"windows\" {}\ngroup \"k8s\" {\n  children = [\"windwos\"]\n}\n", "Unknown group", `Did you mean "windows"?`, "3:15"},
		{"hcl all as child", "hcl", "group \"g\" {\n  children = [\"all\"]\n}\n", "Invalid child group", "every group", "2:15"},
		{"hcl duplicate child", "hcl", "group \"a\" {}\ngroup \"g\" {\n  children = [\"a\", \"a\"]\n}\n", "Duplicate child group", "(line 3)", "3:20"},
		{"hcl children not a list", "hcl", "group \"g\" {\n  children = {}\n}\n", "Invalid children", "list of group names", "2:14"},
		{"hcl duplicate group", "hcl", "group \"g\" {}\ngroup \"g\" {}\n", "Duplicate group", "line 1", "2:7"},
		{"hcl bad group name", "hcl", "group \"a b\" {}\n", "Invalid group name", "space", "1:7"},
		{"hcl duplicate host block", "hcl", "host \"a\" {}\ngroup \"g\" {\n  host \"a\" {}\n}\n", "Duplicate host block", "line 1", "3:8"},
		{"hcl vars in host block", "hcl", "host \"a\" {\n  vars = {}\n}\n", "Unexpected vars in host block", "attributes of its block", "2:3"},
		{"hcl groups in host block", "hcl", "host \"a\" {\n  groups = [\"g\"]\n}\n", "Unexpected groups in host block", `hosts = ["a"]`, "2:3"},
		{"hcl block in host block", "hcl", "host \"a\" {\n  vars {}\n}\n", "Unexpected \"vars\" block", "not allowed", "2:3"},
		{"hcl duplicate host variable", "hcl", "host \"a\" {\n  x = 1\n  x = 2\n}\n", "Attribute redefined", `"x" was already set`, "3:3"},
		{"hcl vars not an object", "hcl", "group \"g\" {\n  vars = [\"a\"]\n}\n", "Invalid vars", `group "g"`, "2:10"},
		{"hcl duplicate group variable", "hcl", "group \"g\" {\n  vars = { a = 1, a = 2 }\n}\n", "Duplicate variable", "line 2", "2:19"},
		{"hcl reference", "hcl", "host \"a\" {\n  x = var.y\n}\n", "Variables not allowed", "", "2:7"},
		{"hcl function call", "hcl", "host \"a\" {\n  x = file(\"k\")\n}\n", "Function calls not allowed", "", "2:7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := parseAs(tt.format, tt.src)
			if !diags.HasErrors() {
				t.Fatalf("no error for %q", tt.src)
			}
			d := diags[0]
			if d.Severity != hcl.DiagError {
				t.Errorf("severity %v", d.Severity)
			}
			if !strings.Contains(d.Summary, tt.summary) || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("got %s\nwant summary ~%q detail ~%q", diagText(diags), tt.summary, tt.detail)
			}
			if d.Subject == nil {
				t.Fatal("no Subject")
			}
			wantFile := map[string]string{"ini": "inv.ini", "yaml": "inv.yml", "hcl": "inv.hcl"}[tt.format]
			got := fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column)
			if d.Subject.Filename != wantFile || got != tt.at {
				t.Errorf("at %s:%s, want %s:%s\n%s", d.Subject.Filename, got, wantFile, tt.at, diagText(diags))
			}
			// The byte offset must agree with line:col.
			off := newSrcFile("", []byte(tt.src)).pos(d.Subject.Start.Byte)
			if off.Line != d.Subject.Start.Line || off.Column != d.Subject.Start.Column {
				t.Errorf("byte %d is %d:%d, not %s", d.Subject.Start.Byte, off.Line, off.Column, got)
			}
		})
	}
}

// One mistake should give one error, not a cascade.
func TestDiagnosticsDoNotCascade(t *testing.T) {
	tests := []struct {
		name, format, src string
		want              int
	}{
		{"broken header skips its section", "ini", "[g:bogus]\nx\ny z\n[h]\nok\n", 1},
		{"each bad line reported", "ini", "[g]\n[g:vars]\na\nb\nc=1\n", 2},
		{"yaml shape errors keep parsing", "yaml", "all:\n  hosts: [a]\n  vars: [b]\n  children: {g: {hosts: {ok: }}}\n", 2},
		{"hcl one report per duplicated range", "hcl", "group \"g\" {\n  hosts = [\"w[1:5]\", \"w[2:4]\"]\n}\n", 1},
		{"hcl syntax error stops", "hcl", "group \"g\" {\n  hosts = [\n}\nbogus\n", 1},
		{"hcl model errors keep parsing", "hcl", "group \"g\" {\n  hosts = [\"a\", \"a\"]\n  children = [\"nope\"]\n}\nhost \"b c\" {}\n", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, diags := parseAs(tt.format, tt.src)
			if len(diags) != tt.want {
				t.Errorf("got %d diagnostics, want %d:\n%s", len(diags), tt.want, diagText(diags))
			}
			if inv == nil || inv.Groups["all"] == nil {
				t.Fatal("inventory must still be returned")
			}
		})
	}
}
