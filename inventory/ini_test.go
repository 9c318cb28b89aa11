package inventory

import (
	"strings"
	"testing"
)

func TestParseINI(t *testing.T) {
	tests := []struct {
		name      string
		src       string
		order     []string
		groups    map[string][]string          // group -> direct hosts
		children  map[string][]string          // group -> direct children
		hostVars  map[string]map[string]string // host -> own vars
		groupVars map[string]map[string]string // group -> own vars
		hostGrps  map[string][]string          // host -> direct groups
	}{
		{
			name:     "hosts before any section are ungrouped",
			src:      "win01\nwin02 ansible_host=10.0.0.2\n\n[linux]\ncp01\n",
			order:    []string{"win01", "win02", "cp01"},
			groups:   map[string][]string{"ungrouped": {"win01", "win02"}, "linux": {"cp01"}, "all": {"win01", "win02", "cp01"}},
			hostVars: map[string]map[string]string{"win02": {"ansible_host": "10.0.0.2"}},
			hostGrps: map[string][]string{"win01": {"ungrouped"}, "cp01": {"linux"}},
		},
		{
			name:   "numeric range keeps zero padding",
			src:    "[windows]\nwin[01:03]\n",
			order:  []string{"win01", "win02", "win03"},
			groups: map[string][]string{"windows": {"win01", "win02", "win03"}, "ungrouped": nil},
		},
		{
			name:  "unpadded range, step, letters and several ranges",
			src:   "n[8:10]\ns[1:7:3]\nweb[a:c]\nr[1:2][x:y]\n",
			order: []string{"n8", "n9", "n10", "s1", "s4", "s7", "weba", "webb", "webc", "r1x", "r1y", "r2x", "r2y"},
		},
		{
			name:     "quoted values lose quotes, backslashes stay",
			src:      `h1 a="two words" b='single q' c=C:\temp d="say \"hi\"" e= f=x=y` + "\n",
			hostVars: map[string]map[string]string{"h1": {"a": "two words", "b": "single q", "c": `C:\temp`, "d": `say "hi"`, "e": "", "f": "x=y"}},
		},
		{
			name:     "host:port sets ansible_port, comments are ignored",
			src:      "# comment\n; other comment\n  win01:5986 ansible_user=admin # trailing\n",
			hostVars: map[string]map[string]string{"win01": {"ansible_port": "5986", "ansible_user": "admin"}},
		},
		{
			name:      "vars sections, quoting and inline comments",
			src:       "[g]\nh\n[g:vars]\na = 1\nb=\"quoted # not a comment\"  # comment\nc=pass#word\nd=value # comment\ne='x'\nf=\n",
			groupVars: map[string]map[string]string{"g": {"a": "1", "b": "quoted # not a comment", "c": "pass#word", "d": "value", "e": "x", "f": ""}},
		},
		{
			name:     "children, created empty if never defined",
			src:      "[k8s:children]\nwindows\nlinux\n[windows]\nwin01\n[windows:children]\ngpu\n",
			children: map[string][]string{"k8s": {"windows", "linux"}, "windows": {"gpu"}, "linux": nil, "gpu": nil, "all": {"ungrouped", "k8s"}},
			groups:   map[string][]string{"linux": nil, "gpu": nil, "windows": {"win01"}},
			hostGrps: map[string][]string{"win01": {"windows"}},
		},
		{
			name:     "host in a group and ungrouped leaves ungrouped",
			src:      "win01 a=1\n[windows]\nwin01 b=2\n",
			groups:   map[string][]string{"ungrouped": nil, "windows": {"win01"}},
			hostGrps: map[string][]string{"win01": {"windows"}},
			hostVars: map[string]map[string]string{"win01": {"a": "1", "b": "2"}},
		},
		{
			name:      "repeated sections merge, later values win",
			src:       "[g]\nh a=1\n[g:vars]\nx=1\n[g]\nh a=2\nh2\n[g:vars]\nx=2\n",
			groups:    map[string][]string{"g": {"h", "h2"}},
			hostVars:  map[string]map[string]string{"h": {"a": "2"}},
			groupVars: map[string]map[string]string{"g": {"x": "2"}},
		},
		{
			name:      "all section, all:vars and :hosts suffix",
			src:       "[all]\nh1\n[all:vars]\nntp=pool\n[web:hosts]\nw1\n",
			groups:    map[string][]string{"ungrouped": {"h1"}, "web": {"w1"}},
			groupVars: map[string]map[string]string{"all": {"ntp": "pool"}},
			hostGrps:  map[string][]string{"h1": {"ungrouped"}},
		},
		{
			name:      "CRLF line endings and a BOM",
			src:       "\xEF\xBB\xBF[windows]\r\nwin01 a=\"x y\"\r\n[windows:vars]\r\nb=c\r\n",
			groups:    map[string][]string{"windows": {"win01"}},
			hostVars:  map[string]map[string]string{"win01": {"a": "x y"}},
			groupVars: map[string]map[string]string{"windows": {"b": "c"}},
		},
		{
			name:      "section header with trailing comment, vars group defined later by children",
			src:       "[db:vars] # later\nport=5432\n[servers:children]  ; comment\ndb\n",
			groupVars: map[string]map[string]string{"db": {"port": "5432"}},
			children:  map[string][]string{"servers": {"db"}},
		},
		{
			name:   "empty file",
			src:    "",
			order:  nil,
			groups: map[string][]string{"all": nil, "ungrouped": nil},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := parse(t, "ini", tt.src)
			if tt.order != nil || tt.src == "" {
				equal(t, "order", inv.Order, tt.order)
			}
			checkInventory(t, inv, tt.groups, tt.children, tt.hostVars, tt.groupVars, tt.hostGrps)
		})
	}
}

func checkInventory(t *testing.T, inv *Inventory, groups, children map[string][]string, hostVars, groupVars map[string]map[string]string, hostGrps map[string][]string) {
	t.Helper()
	for _, g := range []string{"all", "ungrouped"} {
		if inv.Groups[g] == nil {
			t.Fatalf("group %q missing", g)
		}
	}
	for g, want := range groups {
		if inv.Groups[g] == nil {
			t.Errorf("group %q missing", g)
			continue
		}
		equal(t, g+" hosts", inv.Groups[g].Hosts, want)
	}
	for g, want := range children {
		if inv.Groups[g] == nil {
			t.Errorf("group %q missing", g)
			continue
		}
		equal(t, g+" children", inv.Groups[g].Children, want)
	}
	for h, want := range hostVars {
		if inv.Hosts[h] == nil {
			t.Errorf("host %q missing", h)
			continue
		}
		equal(t, h+" vars", varStrings(inv.Hosts[h].Vars), want)
	}
	for g, want := range groupVars {
		equal(t, g+" vars", varStrings(inv.Groups[g].Vars), want)
	}
	for h, want := range hostGrps {
		equal(t, h+" groups", inv.Hosts[h].Groups, want)
	}
}

// Every INI value's range must start exactly at the value in the source.
func TestINIVarRanges(t *testing.T) {
	src := "[windows]\n" +
		"win[01:02]:5986 ansible_host=10.0.0.1 label=\"a b\"\n" +
		"[windows:vars]\n" +
		"  ansible_user = Administrator   # admin\n" +
		"path='C:\\k'\n" +
		"\xc3\xa9t\xc3\xa9=\xc3\xa9 \n" // "été=é": columns count characters
	inv := parse(t, "ini", src)
	tests := []struct {
		owner, key   string
		group        bool
		text         string // source text the range must cover
		line, column int
	}{
		{"win01", "ansible_port", false, "5986", 2, 12},
		{"win02", "ansible_host", false, "10.0.0.1", 2, 30},
		{"win01", "label", false, `"a b"`, 2, 45},
		{"windows", "ansible_user", true, "Administrator", 4, 18},
		{"windows", "path", true, `'C:\k'`, 5, 6},
		{"windows", "été", true, "é", 6, 5},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			vars := inv.Hosts[tt.owner]
			var v Var
			if tt.group {
				v = inv.Groups[tt.owner].Vars[tt.key]
			} else {
				v = vars.Vars[tt.key]
			}
			r := v.Range
			if r.Filename != "inv.ini" || r.Start.Line != tt.line || r.Start.Column != tt.column {
				t.Errorf("range %s:%d:%d, want inv.ini:%d:%d", r.Filename, r.Start.Line, r.Start.Column, tt.line, tt.column)
			}
			if got := src[r.Start.Byte:r.End.Byte]; got != tt.text {
				t.Errorf("range covers %q, want %q", got, tt.text)
			}
		})
	}
	h := inv.Hosts["win02"].Range
	if got := src[h.Start.Byte:h.End.Byte]; got != "win[01:02]:5986" || h.Start.Line != 2 || h.Start.Column != 1 {
		t.Errorf("host range covers %q at %d:%d", got, h.Start.Line, h.Start.Column)
	}
}

func TestExpandHostPattern(t *testing.T) {
	tests := []struct {
		pattern string
		names   string // comma-joined
		port    string
		err     string
	}{
		{"win01", "win01", "", ""},
		{"win[01:03]", "win01,win02,win03", "", ""},
		{"win[1:3]", "win1,win2,win3", "", ""},
		{"win[:2]", "win0,win1,win2", "", ""},
		{"win[001:010:4]", "win001,win005,win009", "", ""},
		{"web[a:c].corp", "weba.corp,webb.corp,webc.corp", "", ""},
		{"web[y:B]", "weby,webz,webA,webB", "", ""},
		{"r[1:2]-[a:b]:22", "r1-a,r1-b,r2-a,r2-b", "22", ""},
		{"10.0.0.[1:2]", "10.0.0.1,10.0.0.2", "", ""},
		{"fe80::1", "fe80::1", "", ""},
		{"win[10:01]", "", "", "Invalid host range"},
		{"win[a:5]", "", "", "Invalid host range"},
		{"win[01:1]", "", "", "Invalid host range"},
		{"win[c:a]", "", "", "Invalid host range"},
		{"win[1:5:0]", "", "", "Invalid host range step"},
		{"win[1:]", "", "", "Invalid host range"},
		{"win[5]", "", "", "Invalid host range"},
		{"win[1:5", "", "", "Unterminated host range"},
		{"win[1:[2]", "", "", "Unterminated host range"},
		{"win]", "", "", "Invalid host name"},
		{"win[0:99999]", "", "", "Host range too large"},
		{"w[0:999][0:999]", "", "", "Host range too large"},
		{"win01:http", "", "", "Invalid port"},
		{"win01:99999", "", "", "Invalid port"},
		{":22", "", "", "Missing host name"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			hp, err := expandHostPattern(tt.pattern)
			if tt.err != "" {
				if err == nil || err.summary != tt.err {
					t.Fatalf("want error %q, got %+v", tt.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %+v", err)
			}
			equal(t, "names", strings.Join(hp.names, ","), tt.names)
			equal(t, "port", hp.port, tt.port)
		})
	}
}
