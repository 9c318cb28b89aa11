package funcs

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// eval parses src as an HCL expression and evaluates it with funcs. It also
// records the names of the functions the expression calls in seen, if given.
func eval(t *testing.T, funcs map[string]function.Function, src string, seen map[string]bool) (cty.Value, hcl.Diagnostics) {
	t.Helper()
	expr, diags := hclsyntax.ParseExpression([]byte(src), "test.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatalf("parse %s: %s", src, diags.Error())
	}
	if seen != nil {
		hclsyntax.VisitAll(expr, func(n hclsyntax.Node) hcl.Diagnostics {
			if call, ok := n.(*hclsyntax.FunctionCallExpr); ok {
				seen[call.Name] = true
			}
			return nil
		})
	}
	return expr.Value(&hcl.EvalContext{Functions: funcs})
}

func noDiags(t *testing.T, diags hcl.Diagnostics) {
	t.Helper()
	if diags.HasErrors() {
		t.Fatalf("unexpected error: %s", diags.Error())
	}
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func containsText(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Errorf("error %q does not contain %q", got, want)
	}
}

func assertValue(t *testing.T, want, got cty.Value) {
	t.Helper()
	if !got.Type().Equals(want.Type()) || !got.RawEquals(want) {
		t.Errorf("wrong result\n got: %#v\nwant: %#v", got, want)
	}
}

func strList(s ...string) cty.Value {
	vals := make([]cty.Value, len(s))
	for i, v := range s {
		vals[i] = cty.StringVal(v)
	}
	return cty.ListVal(vals)
}

func strTuple(s ...string) cty.Value {
	vals := make([]cty.Value, len(s))
	for i, v := range s {
		vals[i] = cty.StringVal(v)
	}
	return cty.TupleVal(vals)
}

func strSet(s ...string) cty.Value {
	vals := make([]cty.Value, len(s))
	for i, v := range s {
		vals[i] = cty.StringVal(v)
	}
	return cty.SetVal(vals)
}

func num(n int64) cty.Value { return cty.NumberIntVal(n) }

func str(s string) cty.Value { return cty.StringVal(s) }

func TestFunctions(t *testing.T) {
	funcs := Table("testdata", nil)
	seen := map[string]bool{}

	tests := []struct {
		expr string
		want cty.Value
	}{
		// numeric
		{`abs(-3.5)`, cty.NumberFloatVal(3.5)},
		{`ceil(1.2)`, num(2)},
		{`floor(1.8)`, num(1)},
		{`log(8, 2)`, num(3)},
		{`max(1, 5, 3)`, num(5)},
		{`min(1, 5, 3)`, num(1)},
		{`pow(2, 10)`, num(1024)},
		{`signum(-7)`, num(-1)},
		{`parseint("ff", 16)`, num(255)},

		// strings
		{`chomp("hi\n")`, str("hi")},
		{`format("%s-%03d", "a", 7)`, str("a-007")},
		{`formatlist("%s=%s", ["a", "b"], ["1", "2"])`, strList("a=1", "b=2")},
		{`indent(2, "a\nb")`, str("a\n  b")},
		{`join(",", ["a", "b"])`, str("a,b")},
		{`lower("ABC")`, str("abc")},
		{`upper("abc")`, str("ABC")},
		{`regex("[a-z]+", "123abc456")`, str("abc")},
		{`regexall("[0-9]+", "a1b22")`, strList("1", "22")},
		{`replace("hello world", "o", "0")`, str("hell0 w0rld")},
		{`replace("hello world", "/o(r?)/", "0$1")`, str("hell0 w0rld")},
		{`replace("a1b22c333", "/[0-9]+/", "#")`, str("a#b#c#")},
		{`replace("k8s-node-01", "/^(\\w+)-node-(\\d+)$/", "$2.$1")`, str("01.k8s")},
		{`replace("path/to/file", "/", "\\")`, str(`path\to\file`)},
		{`replace("a//b", "//", "/")`, str("a/b")},
		{`split(",", "a,b")`, strList("a", "b")},
		{`strrev("abc")`, str("cba")},
		{`substr("hello", 1, 3)`, str("ell")},
		{`title("hello world")`, str("Hello World")},
		{`trim("?!hi!?", "!?")`, str("hi")},
		{`trimprefix("foobar", "foo")`, str("bar")},
		{`trimsuffix("foobar", "bar")`, str("foo")},
		{`trimspace("  x \n")`, str("x")},
		{`startswith("hello", "he")`, cty.True},
		{`startswith("hello", "lo")`, cty.False},
		{`endswith("hello", "lo")`, cty.True},
		{`endswith("hello", "he")`, cty.False},
		{`strcontains("hello", "ell")`, cty.True},
		{`strcontains("hello", "xyz")`, cty.False},

		// collections
		{`chunklist(["a", "b", "c"], 2)`, cty.ListVal([]cty.Value{strList("a", "b"), strList("c")})},
		{`coalesce("", "b")`, str("b")},
		{`coalesce(null, 2, 3)`, num(2)},
		{`coalesce(1, "x")`, str("1")},
		{`coalescelist([], ["a"])`, strTuple("a")},
		{`compact(["a", "", "b"])`, strList("a", "b")},
		{`concat(["a"], ["b"])`, strTuple("a", "b")},
		{`contains(["a", "b"], "b")`, cty.True},
		{`distinct(["a", "b", "a"])`, strList("a", "b")},
		{`element(["a", "b"], 3)`, str("b")},
		{`flatten([["a"], ["b", ["c"]]])`, strTuple("a", "b", "c")},
		{`index(["a", "b"], "b")`, num(1)},
		{`keys({a = 1, b = 2})`, strTuple("a", "b")},
		{`length("héllo")`, num(5)},
		{`length(["a", "b"])`, num(2)},
		{`length({a = 1})`, num(1)},
		{`length(tomap({a = 1, b = 2}))`, num(2)},
		{`lookup({a = "x"}, "b", "d")`, str("d")},
		{`lookup({a = "x"}, "a", "d")`, str("x")},
		{`merge({a = 1}, {b = 2})`, cty.ObjectVal(map[string]cty.Value{"a": num(1), "b": num(2)})},
		{`range(3)`, cty.ListVal([]cty.Value{num(0), num(1), num(2)})},
		{`reverse(["a", "b", "c"])`, strTuple("c", "b", "a")},
		{`setintersection(["a", "b"], ["b", "c"])`, strSet("b")},
		{`setproduct(["a"], ["x", "y"])`, cty.ListVal([]cty.Value{strTuple("a", "x"), strTuple("a", "y")})},
		{`setproduct(toset(["a"]), toset(["x"]))`, cty.SetVal([]cty.Value{strTuple("a", "x")})},
		{`setsubtract(["a", "b"], ["a"])`, strSet("b")},
		{`setunion(["a"], ["b"])`, strSet("a", "b")},
		{`slice(["a", "b", "c"], 1, 3)`, strTuple("b", "c")},
		{`sort(["b", "c", "a"])`, strList("a", "b", "c")},
		{`values({a = "x", b = "y"})`, strTuple("x", "y")},
		{`zipmap(["a", "b"], [1, 2])`, cty.ObjectVal(map[string]cty.Value{"a": num(1), "b": num(2)})},

		// encoding
		{`jsonencode({a = 1, b = ["x"]})`, str(`{"a":1,"b":["x"]}`)},
		{`jsondecode("{\"a\":[1,true]}")`, cty.ObjectVal(map[string]cty.Value{"a": cty.TupleVal([]cty.Value{num(1), cty.True})})},
		{`csvdecode("a,b\n1,2\n")`, cty.ListVal([]cty.Value{cty.ObjectVal(map[string]cty.Value{"a": str("1"), "b": str("2")})})},
		{`yamlencode({a = 1, b = ["x", "y"]})`, str("\"a\": 1\n\"b\":\n- \"x\"\n- \"y\"\n")},
		{`yamldecode("a: 1\nb: [x, z]\n")`, cty.ObjectVal(map[string]cty.Value{"a": num(1), "b": strTuple("x", "z")})},
		{`yamldecode(yamlencode({name = "web", ports = [80, 443], tls = true}))`, cty.ObjectVal(map[string]cty.Value{
			"name": str("web"), "ports": cty.TupleVal([]cty.Value{num(80), num(443)}), "tls": cty.True,
		})},
		{`base64encode("hello")`, str("aGVsbG8=")},
		{`base64decode("aGVsbG8=")`, str("hello")},
		{`base64decode(base64encode("ünïcødé"))`, str("ünïcødé")},

		// hashing
		{`md5("hello")`, str("5d41402abc4b2a76b9719d911017c592")},
		{`sha1("hello")`, str("aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d")},
		{`sha256("hello")`, str("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824")},
		{`sha512("hello")`, str("9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043")},

		// date and time
		{`formatdate("YYYY-MM-DD hh:mm", "2024-01-02T03:04:05Z")`, str("2024-01-02 03:04")},
		{`timeadd("2024-01-02T03:04:05Z", "1h30m")`, str("2024-01-02T04:34:05Z")},

		// type conversion
		{`tostring(1)`, str("1")},
		{`tonumber("2")`, num(2)},
		{`tobool("true")`, cty.True},
		{`tolist(["a", "b"])`, strList("a", "b")},
		{`toset(["a", "a", "b"])`, strSet("a", "b")},
		{`tomap({a = "x"})`, cty.MapVal(map[string]cty.Value{"a": str("x")})},

		// error handling
		{`try(tonumber("x"), 5)`, num(5)},
		{`try({a = 1}.b, "fallback")`, str("fallback")},
		{`try(tonumber("7"), 5)`, num(7)},
		{`can(tonumber("x"))`, cty.False},
		{`can(cidrhost("10.0.0.0/8", 1))`, cty.True},

		// files
		{`file("hello.txt")`, str("Hello, wsu!\n")},
		{`filebase64("hello.txt")`, str("SGVsbG8sIHdzdSEK")},
		{`filesha256("hello.txt")`, str("736d4e034f8576067dea5cb23ef16aeb46944ae900d5fb630524cdabd728b20c")},
		{`fileexists("hello.txt")`, cty.True},
		{`fileexists("missing.txt")`, cty.False},
		{`templatefile("inventory.tftpl", {env = "prod", hosts = [{name = "web1", path = "C:\\k"}, {name = "web2", path = "C:\\Program Files\\k"}]})`,
			str("# hosts for PROD\n0: web1 C:\\k\n1: web2 \"C:\\Program Files\\k\"\ntotal: 2\n")},
		{`basename("/etc/wsu/site.hcl")`, str("site.hcl")},
		{`dirname("/etc/wsu/site.hcl")`, str("/etc/wsu")},

		// networking
		{`cidrhost("10.12.112.0/20", 16)`, str("10.12.112.16")},
		{`cidrhost("10.12.112.0/20", 268)`, str("10.12.113.12")},
		{`cidrhost("10.12.112.7/20", 1)`, str("10.12.112.1")},
		{`cidrhost("10.0.0.0/8", -1)`, str("10.255.255.255")},
		{`cidrhost("10.0.0.0/30", -4)`, str("10.0.0.0")},
		{`cidrhost("fd00:fd12:3456:7890:00a2::/72", 34)`, str("fd00:fd12:3456:7890::22")},
		{`cidrhost("fd00::/8", -1)`, str("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")},
		{`cidrnetmask("172.16.0.0/12")`, str("255.240.0.0")},
		{`cidrnetmask("10.0.0.0/32")`, str("255.255.255.255")},
		{`cidrnetmask("0.0.0.0/0")`, str("0.0.0.0")},
		{`cidrsubnet("172.16.0.0/12", 4, 2)`, str("172.18.0.0/16")},
		{`cidrsubnet("10.1.2.0/24", 4, 15)`, str("10.1.2.240/28")},
		{`cidrsubnet("10.0.0.0/8", 0, 0)`, str("10.0.0.0/8")},
		{`cidrsubnet("fd00:fd12:3456:7890::/56", 16, 162)`, str("fd00:fd12:3456:7800:a200::/72")},
		{`cidrsubnet("fd00::/8", 120, 1)`, str("fd00::1/128")},
		{`cidrcontains("192.168.2.0/24", "192.168.2.1")`, cty.True},
		{`cidrcontains("192.168.2.0/24", "192.168.3.1")`, cty.False},
		{`cidrcontains("10.0.0.0/8", "10.1.0.0/16")`, cty.True},
		{`cidrcontains("10.1.0.0/16", "10.0.0.0/8")`, cty.False},
		{`cidrcontains("fd00::/8", "fd00:1::1")`, cty.True},
		{`cidrcontains("fd00::/8", "fe80::/10")`, cty.False},

		// windows helpers
		{`winpath("C:\\k", "cni", "config")`, str(`C:\k\cni\config`)},
		{`winpath("C:\\k\\", "\\cni\\", "config")`, str(`C:\k\cni\config`)},
		{`winpath("C:/k", "cni/bin")`, str(`C:\k\cni\bin`)},
		{`winpath("C:\\k", "", "x")`, str(`C:\k\x`)},
		{`winpath("\\\\server\\share", "dir")`, str(`\\server\share\dir`)},
		{`winpath("C:\\")`, str(`C:\`)},
		{`winpath()`, str("")},
		{`quotearg("plain")`, str("plain")},
		{`ssh_public_key("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINJIRU3ls+WdxKeN4dYebafGmbmylCVj/fCosXqWDx/4 a comment")`, str("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAINJIRU3ls+WdxKeN4dYebafGmbmylCVj/fCosXqWDx/4")},
		{`quotearg("C:\\k\\bin")`, str(`C:\k\bin`)},
		{`quotearg("")`, str(`""`)},
		{`quotearg("a b")`, str(`"a b"`)},
		{`quotearg("a\tb")`, str("\"a\tb\"")},
		{`quotearg("say \"hi\"")`, str(`"say \"hi\""`)},
		{`quotearg("a\"b")`, str(`"a\"b"`)},
		{`quotearg("C:\\Program Files\\")`, str(`"C:\Program Files\\"`)},
		{`quotearg("a\\\\\"b")`, str(`"a\\\\\"b"`)},
		{`quotearg("a\\b c")`, str(`"a\b c"`)},
	}

	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			got, diags := eval(t, funcs, tc.expr, seen)
			noDiags(t, diags)
			assertValue(t, tc.want, got)
		})
	}

	// base64gzip output depends on the compressor, so check it round trips.
	t.Run("base64gzip", func(t *testing.T) {
		got, diags := eval(t, funcs, `base64gzip("hello hello hello")`, seen)
		noDiags(t, diags)
		raw, err := base64.StdEncoding.DecodeString(got.AsString())
		noErr(t, err)
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		noErr(t, err)
		plain, err := io.ReadAll(zr)
		noErr(t, err)
		if string(plain) != "hello hello hello" {
			t.Errorf("round trip gave %q", plain)
		}
	})

	// Every function in the table must be exercised above.
	for _, name := range Names() {
		if !seen[name] {
			t.Errorf("function %s has no test case", name)
		}
	}
}

func TestFunctionErrors(t *testing.T) {
	funcs := Table("testdata", nil)
	tests := []struct {
		expr string
		want []string
	}{
		{`file("missing.txt")`, []string{"no file exists at " + filepath.Join("testdata", "missing.txt")}},
		{`filebase64("missing.txt")`, []string{"no file exists at"}},
		{`filesha256("missing.txt")`, []string{"no file exists at"}},
		{`file("invalid-utf8.bin")`, []string{"invalid-utf8.bin are not valid UTF-8"}},
		{`fileexists(".")`, []string{"is not a regular file"}},
		{`base64decode("!!!")`, []string{"failed to decode base64 data"}},
		{`base64decode("/w==")`, []string{"the result of decoding the provided string is not valid UTF-8"}},
		{`cidrsubnet("10.0.0.0/24", 4, 16)`, []string{"prefix extension of 4 does not accommodate a subnet numbered 16"}},
		{`cidrsubnet("10.0.0.0/24", 4, -1)`, []string{"prefix extension of 4 does not accommodate a subnet numbered -1"}},
		{`cidrsubnet("10.0.0.0/30", 3, 0)`, []string{"insufficient address space to extend prefix of 30 by 3"}},
		{`cidrsubnet("fd00::/64", 65, 0)`, []string{"insufficient address space to extend prefix of 64 by 65"}},
		{`cidrsubnet("10.0.0.0/8", -1, 0)`, []string{"newbits must not be negative"}},
		{`cidrsubnet("10.0.0.0/8", 1.5, 0)`, []string{"newbits must be a whole number"}},
		{`cidrhost("10.0.0.0/30", 4)`, []string{"prefix of 30 bits cannot accommodate a host numbered 4"}},
		{`cidrhost("10.0.0.0/30", -5)`, []string{"prefix of 30 bits cannot accommodate a host numbered -5"}},
		{`cidrhost("not-a-cidr", 1)`, []string{`invalid CIDR expression "not-a-cidr"`}},
		{`cidrhost("10.0.0.0/33", 1)`, []string{`invalid CIDR expression "10.0.0.0/33"`}},
		{`cidrnetmask("fd00::/8")`, []string{"IPv6 addresses cannot have a netmask: fd00::/8"}},
		{`cidrcontains("10.0.0.0/8", "fd00::1")`, []string{"address family mismatch: 10.0.0.0/8 vs. fd00::1"}},
		{`cidrcontains("10.0.0.0/8", "10.0.0.300")`, []string{`invalid IP address "10.0.0.300"`}},
		{`coalesce()`, []string{"at least one argument is required"}},
		{`coalesce("", null)`, []string{"no non-null, non-empty-string arguments"}},
		{`coalesce("a", ["b"])`, []string{"all arguments must have the same type"}},
		{`index(["a"], "z")`, []string{"item not found"}},
		{`length(true)`, []string{"argument must be a string, a collection type, or a structural type"}},
		{`replace("a", "/(/", "x")`, []string{"invalid regular expression"}},
		{`templatefile("missing.tftpl", {})`, []string{"no file exists at"}},
		{`templatefile("missing-var.tftpl", {name = "x"})`, []string{
			filepath.Join("testdata", "missing-var.tftpl") + ":1,", `vars map does not contain key "missing"`,
		}},
		{`templatefile("bad-call.tftpl", {})`, []string{
			"failed to render template", filepath.Join("testdata", "bad-call.tftpl") + ":2,", `cannot convert "nope" to number`,
		}},
		{`templatefile("syntax-error.tftpl", {name = "x"})`, []string{
			"failed to parse template", filepath.Join("testdata", "syntax-error.tftpl") + ":",
		}},
		{`templatefile("recursive.tftpl", {})`, []string{`There is no function named "templatefile"`}},
		{`templatefile("hello.txt", ["x"])`, []string{"vars must be an object or map"}},
		{`templatefile("hello.txt", {"bad name" = 1})`, []string{`invalid template variable name "bad name"`}},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			_, diags := eval(t, funcs, tc.expr, nil)
			if !diags.HasErrors() {
				t.Fatal("expected an error")
			}
			for _, want := range tc.want {
				containsText(t, diags.Error(), want)
			}
		})
	}
}

func TestFileFunctionsAbsolutePath(t *testing.T) {
	abs, err := filepath.Abs(filepath.Join("testdata", "hello.txt"))
	noErr(t, err)
	// An absolute path ignores baseDir.
	funcs := Table(t.TempDir(), nil)
	src := `file("` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(abs) + `")`
	got, diags := eval(t, funcs, src, nil)
	noDiags(t, diags)
	assertValue(t, str("Hello, wsu!\n"), got)
}

func TestEmbeddedFS(t *testing.T) {
	fsys := fstest.MapFS{
		"playbooks/site/files/motd.txt":    {Data: []byte("welcome\n")},
		"playbooks/site/templates/a.tftpl": {Data: []byte("%{ for n in nodes }[${n}]%{ endfor } ${file(\"files/motd.txt\")}")},
		"shared/common.txt":                {Data: []byte("common")},
		"playbooks/site/files/bin.dat":     {Data: []byte{0xff, 0x00}},
	}
	funcs := Table("playbooks/site", fsys)

	tests := []struct {
		expr string
		want cty.Value
	}{
		{`file("files/motd.txt")`, str("welcome\n")},
		{`file("./files/../files/motd.txt")`, str("welcome\n")},
		{`file("../../shared/common.txt")`, str("common")},
		{`filebase64("files/bin.dat")`, str("/wA=")},
		{`filesha256("../../shared/common.txt")`, str("92a5dc04bd6f9fb8f29f8066fed8a5c1e81bc59ad48a11283b63736867e4f2a8")},
		{`fileexists("files/motd.txt")`, cty.True},
		{`fileexists("files/nope.txt")`, cty.False},
		{`templatefile("templates/a.tftpl", {nodes = ["a", "b"]})`, str("[a][b] welcome\n")},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			got, diags := eval(t, funcs, tc.expr, nil)
			noDiags(t, diags)
			assertValue(t, tc.want, got)
		})
	}

	// An absolute path is the user's file on disk (a payload manifest),
	// never a name inside the embedded playbooks.
	abs := filepath.Join(t.TempDir(), "manifest.json")
	if err := os.WriteFile(abs, []byte(`{"version":"1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(abs)
	for expr, want := range map[string]cty.Value{
		`file("` + quoted + `")`:       str(`{"version":"1"}`),
		`fileexists("` + quoted + `")`: cty.True,
	} {
		got, diags := eval(t, funcs, expr, nil)
		noDiags(t, diags)
		assertValue(t, want, got)
	}

	errTests := []struct {
		expr string
		want string
	}{
		{`file("/shared/common.txt")`, "no file exists at /shared/common.txt"},
		{`file("files/nope.txt")`, "no file exists at playbooks/site/files/nope.txt"},
		{`file("../../../outside.txt")`, "outside the embedded playbook filesystem"},
		{`fileexists("files")`, "is not a regular file"},
	}
	for _, tc := range errTests {
		t.Run(tc.expr, func(t *testing.T) {
			_, diags := eval(t, funcs, tc.expr, nil)
			if !diags.HasErrors() {
				t.Fatal("expected an error")
			}
			containsText(t, diags.Error(), tc.want)
		})
	}
}

func TestNames(t *testing.T) {
	names := Names()
	if !sort.StringsAreSorted(names) {
		t.Error("Names() must be sorted")
	}

	table := Table("", nil)
	tableNames := make([]string, 0, len(table))
	for name := range table {
		tableNames = append(tableNames, name)
	}
	sort.Strings(tableNames)
	if !slices.Equal(tableNames, names) {
		t.Errorf("Names() = %v, Table() has %v", names, tableNames)
	}

	want := strings.Fields(`
		abs ceil floor log max min pow signum parseint
		chomp format formatlist indent join lower upper regex regexall replace
		split strrev substr title trim trimprefix trimsuffix trimspace
		startswith endswith strcontains
		chunklist coalesce coalescelist compact concat contains distinct element
		flatten index keys length lookup merge range reverse setintersection
		setproduct setsubtract setunion slice sort values zipmap
		jsonencode jsondecode csvdecode formatdate timeadd
		tostring tonumber tobool tolist toset tomap try can yamlencode yamldecode
		base64encode base64decode base64gzip sha1 sha256 sha512 md5
		filebase64 file fileexists filesha256 templatefile basename dirname
		cidrhost cidrsubnet cidrnetmask cidrcontains winpath quotearg ssh_public_key`)
	sort.Strings(want)
	if !slices.Equal(want, names) {
		t.Errorf("Names() = %v, want %v", names, want)
	}
}

func TestUnknownValues(t *testing.T) {
	funcs := Table("testdata", nil)
	vars := map[string]cty.Value{
		"names":  cty.UnknownVal(cty.List(cty.String)),
		"prefix": cty.UnknownVal(cty.String),
		"env":    cty.UnknownVal(cty.String),
	}
	tests := []struct {
		expr string
		want cty.Type
	}{
		{`length(names)`, cty.Number},
		{`length(prefix)`, cty.Number},
		{`cidrhost(prefix, 1)`, cty.String},
		{`replace(prefix, "/a+/", "b")`, cty.String},
		{`winpath("C:\\", prefix)`, cty.String},
		{`templatefile("inventory.tftpl", {env = env, hosts = []})`, cty.DynamicPseudoType},
	}
	for _, tc := range tests {
		t.Run(tc.expr, func(t *testing.T) {
			expr, diags := hclsyntax.ParseExpression([]byte(tc.expr), "test.hcl", hcl.InitialPos)
			noDiags(t, diags)
			got, diags := expr.Value(&hcl.EvalContext{Variables: vars, Functions: funcs})
			noDiags(t, diags)
			if got.IsKnown() {
				t.Errorf("got known value %#v, want unknown", got)
			}
			if tc.want != cty.DynamicPseudoType && !got.Type().Equals(tc.want) {
				t.Errorf("got type %#v, want %#v", got.Type(), tc.want)
			}
		})
	}
}
