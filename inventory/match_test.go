package inventory

import (
	"errors"
	"strings"
	"testing"
)

const matchINI = `bastion
[windows]
win[01:04]
[gpu]
win03
win04
[linux]
cp01
lnx01
[k8s:children]
windows
linux
[staging]
win02
lnx01
[empty]
`

func TestMatch(t *testing.T) {
	inv := parse(t, "ini", matchINI)
	tests := []struct {
		pattern string
		want    string // comma-joined, inventory order
		err     string // substring of the error
	}{
		{pattern: "all", want: "bastion,win01,win02,win03,win04,cp01,lnx01"},
		{pattern: "*", want: "bastion,win01,win02,win03,win04,cp01,lnx01"},
		{pattern: "windows", want: "win01,win02,win03,win04"},
		{pattern: "k8s", want: "win01,win02,win03,win04,cp01,lnx01"},
		{pattern: "ungrouped", want: "bastion"},
		{pattern: "win03", want: "win03"},
		{pattern: "lnx01,win01", want: "win01,lnx01"},
		{pattern: "linux:gpu", want: "win03,win04,cp01,lnx01"},
		{pattern: "windows:&staging", want: "win02"},
		{pattern: "windows:!gpu", want: "win01,win02"},
		{pattern: "k8s:!windows:&staging", want: "lnx01"},
		{pattern: "!gpu:&staging:windows", want: "win02"}, // order of writing does not matter
		{pattern: "windows,&staging", want: "win02"},
		{pattern: "!windows", want: "bastion,cp01,lnx01"},
		{pattern: "win0*", want: "win01,win02,win03,win04"},
		{pattern: "win0?:!win01", want: "win02,win03,win04"},
		{pattern: "*ux", want: "cp01,lnx01"}, // glob on a group name
		{pattern: "~(win|cp)0[13]", want: "win01,win03,cp01"},
		{pattern: "~in", want: ""}, // regex is anchored at the start, like Ansible
		{pattern: "~.*0[24]", want: "win02,win04"},
		{pattern: " windows : &gpu ", want: "win03,win04"},
		{pattern: "empty", want: ""},
		{pattern: "windows:&linux", want: ""},
		{pattern: "nothing*", want: ""},
		{pattern: "windwos", err: `host pattern "windwos": matches no host or group (did you mean "windows"?)`},
		{pattern: "windows:!gpus", err: `"gpus" matches no host or group (did you mean "gpu"?)`},
		{pattern: "win05", err: `(did you mean "win01"?)`},
		{pattern: "zzzzzz", err: `host pattern "zzzzzz": matches no host or group`},
		{pattern: "~win[", err: "not a valid regular expression"},
		{pattern: "windows:&", err: "no name after it"},
		{pattern: " , ", err: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			got, err := inv.Match(tt.pattern)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("want error containing %q, got %v", tt.err, err)
				}
				var pe *PatternError
				if !errors.As(err, &pe) || pe.Pattern != tt.pattern {
					t.Errorf("want *PatternError for %q, got %#v", tt.pattern, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			equal(t, "hosts", strings.Join(got, ","), tt.want)
		})
	}
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "", true},
		{"*", "anything", true},
		{"win?", "win1", true},
		{"win?", "win10", false},
		{"w*n*1", "windows01", true},
		{"a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaac", false},
		{"[ab]", "a", false}, // brackets are literal
		{"[ab]", "[ab]", true},
		{"é?", "éé", true},
	}
	for _, tt := range tests {
		if got := glob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("glob(%q, %q) = %v", tt.pattern, tt.name, got)
		}
	}
}
