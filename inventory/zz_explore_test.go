package inventory

import (
	"fmt"
	"testing"
	"gopkg.in/yaml.v3"
)

func TestExplore(t *testing.T) {
	for _, src := range []string{
		"all:\n  hosts:\n    win01:\n   bad: x\n",
		"all:\n  hosts:\n    win01:\n  - bad\n",
		"all:\n  hosts: [a\n",
		"all:\n  hosts: [a\n  vars: {}\n",
		"all:\n  hosts: {a: *nope}\n",
		"all:\n  vars:\n    a: 1\n  vars: 2\n",
		"all:\n  vars:\n    a: 'x\n    b: 2\n",
		"a: 1\n\x01\n",
		"x: [1, 2}\n",
		"a:\n  b: 1\n c: 2\n",
		"- a\nb: 1\n",
	} {
		var n yaml.Node
		err := yaml.Unmarshal([]byte(src), &n)
		fmt.Printf("%q\n   %v\n", src, err)
	}
}
