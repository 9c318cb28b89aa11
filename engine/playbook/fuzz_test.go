package playbook_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules/all"
)

// fuzzSeeds are valid playbooks exercising most of the loader.
var fuzzSeeds = []string{
	`variable "port" {
  type    = number
  default = 80
  validation {
    condition     = var.port > 0
    error_message = "port must be positive"
  }
}

locals {
  names = toset(["a", "b"])
  url   = "http://${host.name}:${var.port}"
}

include "web" {
  source = "child.hcl"
  vars = {
    port = var.port + 1
  }
}

play "p" {
  hosts  = "all"
  serial = "50%"
  vars = {
    extra = include.web.address
  }
  task "each" {
    for_each = local.names
    when     = each.key != "c"
    tags     = ["setup"]
    print {
      msg = "${each.value} ${var.extra}"
    }
  }
  task "cmd" {
    command {
      argv = ["true"]
    }
    retries = 2
    until   = self.rc == 0
    notify  = ["done"]
  }
  handler "done" {
    assert {
      that = [task.cmd.rc == 0]
    }
  }
}

output "url" {
  value = local.url
}
`,
	`play "p" {
  hosts = "all"
  task "d" {
    directory {
      path = "/tmp/x"
      mode = "0755"
    }
    ignore_errors = true
  }
}
`,
	"",
	"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    print {\n      msg = \"${\n",
}

func FuzzLoad(f *testing.F) {
	if site, err := os.ReadFile(filepath.Join("..", "..", "examples", "demo", "site.hcl")); err == nil {
		f.Add(site)
	}
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, tc := range diagCases {
		if tc.src != "" {
			f.Add([]byte(tc.src))
		}
	}
	// Deep and huge input, refused before parsing (issue 17).
	deep := strings.Repeat("[", 5000) + strings.Repeat("]", 5000)
	f.Add([]byte("locals {\n  x = " + deep + "\n}\n"))
	f.Add([]byte("variable \"v\" {\n  type = " + strings.Repeat("list(", 5000) + "string" + strings.Repeat(")", 5000) + "\n}\n"))
	f.Add([]byte("locals {\n  x = \"" + strings.Repeat("${\"", 5000) + "\n}\n"))
	f.Add([]byte("locals {\n  x = " + strings.Repeat("true ? 1 : ", 5000) + "1\n}\n"))
	f.Add([]byte("locals {\n  x = 1" + strings.Repeat("+1", 5000) + "\n}\n"))
	f.Add([]byte("# " + strings.Repeat("x", 2<<20) + "\n"))
	// Includes in inputs resolve next to the fixtures of diag_test.go.
	name := diagDir("inc", "fuzz.hcl")
	reg := all.Schemas()
	f.Fuzz(func(t *testing.T, src []byte) {
		pb, diags := playbook.NewLoader(reg, nil).LoadSource(name, src)
		if pb == nil && !diags.HasErrors() {
			t.Fatal("no playbook and no error")
		}
		for _, d := range diags {
			checkSubject(t, d, name, src)
		}
	})
}

// checkSubject asserts a diagnostic about the input points inside it.
func checkSubject(t *testing.T, d *hcl.Diagnostic, name string, src []byte) {
	t.Helper()
	s := d.Subject
	if s == nil || s.Filename != name {
		return
	}
	if s.Start.Byte < 0 || s.Start.Byte > s.End.Byte || s.End.Byte > len(src) || s.Start.Line < 1 || s.Start.Column < 1 {
		t.Errorf("%q: subject %s (bytes %d-%d) outside a %d-byte input", d.Summary, s, s.Start.Byte, s.End.Byte, len(src))
	}
}
