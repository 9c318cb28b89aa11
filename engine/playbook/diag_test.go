package playbook_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules/all"
)

// diagCase is one bad playbook and the error it must produce.
type diagCase struct {
	name string
	src  string // inline source, loaded as main.hcl
	file string // or a file under testdata/diag, loaded with Load

	summary   string // substring of the Summary
	filename  string // Subject.Filename; "" means main.hcl
	line, col int    // Subject.Start
	suggest   string // substring of the Detail ("Did you mean ..."), optional
}

func diagDir(parts ...string) string {
	return filepath.Join(append([]string{"testdata", "diag"}, parts...)...)
}

var diagCases = []diagCase{
	{
		name: "syntax error",
		src: `play "p" {
  hosts =
}
`,
		summary: "Invalid expression", line: 2, col: 10,
	},
	{
		name: "unclosed block",
		src: `play "p" {
  hosts = "all"
`,
		summary: "Unclosed configuration block", line: 1, col: 10,
	},
	{
		name: "unknown top-level block",
		src: `plya "p" {
}
`,
		summary: "Unsupported block type", line: 1, col: 1, suggest: `Did you mean "play"?`,
	},
	{
		name: "unknown play argument",
		src: `play "p" {
  hosts = "all"
  serail = 1
}
`,
		summary: "Unsupported argument", line: 3, col: 3, suggest: `Did you mean "serial"?`,
	},
	{
		name: "unknown variable argument",
		src: `variable "x" {
  defualt = 1
}
`,
		summary: "Unsupported argument", line: 2, col: 3, suggest: `Did you mean "default"?`,
	},
	{
		name: "unknown module",
		src: `play "p" {
  hosts = "all"
  task "t" {
    fiel {
      path = "/x"
    }
  }
}
`,
		summary: "Unknown module", line: 4, col: 5, suggest: `Did you mean "file"?`,
	},
	{
		name: "unknown module argument",
		src: `play "p" {
  hosts = "all"
  task "t" {
    file {
      path    = "/x"
      contnet = "y"
    }
  }
}
`,
		summary: "Unsupported argument", line: 6, col: 7, suggest: `Did you mean "content"?`,
	},
	{
		name: "module block label",
		src: `play "p" {
  hosts = "all"
  task "t" {
    print "x" {
      msg = "hi"
    }
  }
}
`,
		summary: "Unexpected label on module block", line: 4, col: 11,
	},
	{
		name: "missing required argument",
		src: `play "p" {
  hosts = "all"
  task "t" {
    file {
      content = "y"
    }
  }
}
`,
		summary: "Missing required argument", line: 4, col: 5,
	},
	{
		name: "list for a string argument",
		src: `play "p" {
  hosts = "all"
  task "t" {
    file {
      path    = "/x"
      content = "y"
      mode    = ["x"]
    }
  }
}
`,
		summary: "Incorrect attribute value type", line: 7, col: 17,
	},
	{
		name: "string for a list argument",
		src: `play "p" {
  hosts = "all"
  task "t" {
    command {
      argv = "ls"
    }
  }
}
`,
		summary: "Incorrect attribute value type", line: 5, col: 14,
	},
	{
		name: "undeclared variable",
		src: `variable "root" {
  type = string
}

play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = var.rot
    }
  }
}
`,
		summary: "Reference to undeclared variable", line: 9, col: 13, suggest: `Did you mean "root"?`,
	},
	{
		name: "undeclared local",
		src: `locals {
  dirs = ["a", "b"]
}

play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = join(",", local.dir)
    }
  }
}
`,
		summary: "Reference to undeclared local value", line: 9, col: 23, suggest: `Did you mean "dirs"?`,
	},
	{
		name: "undeclared task",
		src: `play "p" {
  hosts = "all"
  task "config" {
    print {
      msg = "a"
    }
  }
  task "report" {
    print {
      msg = task.conifg.msg
    }
  }
}
`,
		summary: "Reference to undeclared task", line: 10, col: 13, suggest: `Did you mean "config"?`,
	},
	{
		name: "task used before it runs",
		src: `play "p" {
  hosts = "all"
  task "report" {
    print {
      msg = task.config.msg
    }
  }
  task "config" {
    print {
      msg = "a"
    }
  }
}
`,
		summary: "Task result used too early", line: 5, col: 13,
	},
	{
		name: "task used in its own when",
		src: `play "p" {
  hosts = "all"
  task "t" {
    when = task.t.msg == "x"
    print {
      msg = "a"
    }
  }
}
`,
		summary: "Task result used too early", line: 4, col: 12,
	},
	{
		name: "unknown task result attribute",
		src: `play "p" {
  hosts = "all"
  task "conf" {
    file {
      path    = "/x"
      content = "y"
    }
  }
  task "report" {
    print {
      msg = task.conf.nope
    }
  }
}
`,
		summary: "Unsupported attribute", line: 11, col: 22,
	},
	{
		name: "unknown host attribute",
		src: `play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = host.nmae
    }
  }
}
`,
		summary: "Unknown host attribute", line: 5, col: 13,
	},
	{
		name: "local values cycle",
		src: `locals {
  a = local.b
  b = local.c
  c = local.a
}
`,
		summary: "Cycle in local values", line: 2, col: 3,
	},
	{
		name: "duplicate variable",
		src: `variable "x" {}

variable "x" {}
`,
		summary: `Duplicate variable "x"`, line: 3, col: 1,
	},
	{
		name: "duplicate local",
		src: `locals {
  a = 1
}

locals {
  a = 2
}
`,
		summary: `Duplicate local value "a"`, line: 6, col: 3,
	},
	{
		name: "duplicate task across plays",
		src: `play "one" {
  hosts = "all"
  task "t" {
    print {
      msg = "1"
    }
  }
}

play "two" {
  hosts = "all"
  task "t" {
    print {
      msg = "2"
    }
  }
}
`,
		summary: `Duplicate task "t"`, line: 12, col: 3,
	},
	{
		name: "duplicate handler",
		src: `play "p" {
  hosts = "all"
  handler "restart" {
    print {
      msg = "1"
    }
  }
  handler "restart" {
    print {
      msg = "2"
    }
  }
}
`,
		summary: `Duplicate handler "restart"`, line: 8, col: 3,
	},
	{
		// Located at the task: Task keeps no range for notify.
		name: "notify unknown handler",
		src: `play "p" {
  hosts = "all"
  task "t" {
    notify = ["restrat"]
    print {
      msg = "1"
    }
  }
  handler "restart" {
    print {
      msg = "2"
    }
  }
}
`,
		summary: "Unknown handler", line: 4, col: 14, suggest: `Did you mean "restart"?`,
	},
	{
		name: "notify in a handler",
		src: `play "p" {
  hosts = "all"
  handler "h" {
    notify = ["h"]
    print {
      msg = "2"
    }
  }
}
`,
		summary: "Unsupported argument", line: 4, col: 5,
	},
	{
		name: "two module blocks",
		src: `play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = "1"
    }
    print {
      msg = "2"
    }
  }
}
`,
		summary: "More than one module block", line: 7, col: 5,
	},
	{
		name: "no module block",
		src: `play "p" {
  hosts = "all"
  task "t" {
    when = true
  }
}
`,
		summary: "Missing module block", line: 3, col: 3,
	},
	{
		name: "for_each number",
		src: `play "p" {
  hosts = "all"
  task "t" {
    for_each = 3
    print {
      msg = each.key
    }
  }
}
`,
		summary: "Invalid for_each argument", line: 4, col: 16,
	},
	{
		name: "when not a bool",
		src: `play "p" {
  hosts = "all"
  task "t" {
    when = "maybe"
    print {
      msg = "x"
    }
  }
}
`,
		summary: "Incorrect value type", line: 4, col: 12,
	},
	{
		name: "tags not a list",
		src: `play "p" {
  hosts = "all"
  task "t" {
    tags = "setup"
    print {
      msg = "x"
    }
  }
}
`,
		summary: "Invalid tags", line: 4, col: 12,
	},
	{
		name: "bad default type",
		src: `variable "port" {
  type    = number
  default = "eighty"
}
`,
		summary: "Invalid default value", line: 3, col: 13,
	},
	{
		name: "default refers to a variable",
		src: `variable "a" {
  default = var.b
}
`,
		summary: "Default must be a constant", line: 2, col: 13,
	},
	{
		name: "bad type expression",
		src: `variable "x" {
  type = strng
}
`,
		summary: "Invalid type specification", line: 2, col: 10,
	},
	{
		name: "bad nullable",
		src: `variable "x" {
  nullable = "no"
}
`,
		summary: "Incorrect value type", line: 2, col: 14,
	},
	{
		name: "invalid variable name",
		src: `variable "1x" {
}
`,
		summary: "Invalid variable name", line: 1, col: 10,
	},
	{
		name: "validation without error_message",
		src: `variable "x" {
  validation {
    condition = var.x != ""
  }
}
`,
		summary: "Missing required argument", line: 2, col: 14,
	},
	{
		name: "validation refers to another variable",
		src: `variable "a" {
  validation {
    condition     = var.a != var.b
    error_message = "a equals b"
  }
}

variable "b" {}
`,
		summary: "Invalid reference in variable validation", line: 3, col: 30,
	},
	{
		name: "validation refers to an undeclared variable",
		src: `variable "name" {
  validation {
    condition     = length(var.nmae) > 0
    error_message = "empty"
  }
}
`,
		summary: "Reference to undeclared variable", line: 3, col: 28, suggest: `Did you mean "name"?`,
	},
	{
		name: "task control typo",
		src: `play "p" {
  hosts = "all"
  task "t" {
    wen = true
    print {
      msg = "x"
    }
  }
}
`,
		summary: "Unsupported argument", line: 4, col: 5, suggest: `Did you mean "when"?`,
	},
	{
		name: "play var shadows a variable",
		src: `variable "region" {
  default = "eu"
}

play "p" {
  hosts = "all"
  vars = {
    region = "us"
  }
  task "t" {
    print {
      msg = var.region
    }
  }
}
`,
		summary: "Play variable shadows a variable", line: 8, col: 14,
	},
	{
		name: "each outside for_each",
		src: `play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = each.key
    }
  }
}
`,
		summary: "Reference not allowed here", line: 5, col: 13,
	},
	{
		name: "self outside until",
		src: `play "p" {
  hosts = "all"
  task "t" {
    when = self.msg == "x"
    print {
      msg = "x"
    }
  }
}
`,
		summary: "Reference not allowed here", line: 4, col: 12,
	},
	{
		name: "task in play hosts",
		src: `play "p" {
  hosts = task.t.msg
  task "t" {
    print {
      msg = "x"
    }
  }
}
`,
		summary: "Reference not allowed here", line: 2, col: 11,
	},
	{
		name: "unknown root",
		src: `play "p" {
  hosts = "all"
  task "t" {
    print {
      msg = vars.x
    }
  }
}
`,
		summary: "Unknown reference", line: 5, col: 13, suggest: `Did you mean "var"?`,
	},
	{
		name:    "include of a missing file",
		file:    diagDir("inc", "missing.hcl"),
		summary: "Cannot read playbook", filename: diagDir("inc", "missing.hcl"), line: 2, col: 12,
	},
	{
		name:    "include cycle",
		file:    diagDir("cycle", "a.hcl"),
		summary: "Include cycle", filename: diagDir("cycle", "b.hcl"), line: 2, col: 12,
	},
	{
		name:    "include of itself",
		file:    diagDir("cycle", "self.hcl"),
		summary: "Include cycle", filename: diagDir("cycle", "self.hcl"), line: 2, col: 12,
	},
	{
		name:    "unknown include variable",
		file:    diagDir("inc", "badvar.hcl"),
		summary: "Unknown include variable", filename: diagDir("inc", "badvar.hcl"), line: 4, col: 12,
		suggest: `Did you mean "port"?`,
	},
	{
		name:    "unknown include output",
		file:    diagDir("inc", "badout.hcl"),
		summary: "Unknown include output", filename: diagDir("inc", "badout.hcl"), line: 9, col: 13,
		suggest: `Did you mean "address"?`,
	},
	{
		name:    "include output used before the include",
		file:    diagDir("inc", "early.hcl"),
		summary: "Include output used too early", filename: diagDir("inc", "early.hcl"), line: 5, col: 13,
	},
	{
		name:    "error inside an included file",
		file:    diagDir("inc", "nested.hcl"),
		summary: "Reference to undeclared variable", filename: diagDir("inc", "broken.hcl"), line: 6, col: 13,
		suggest: `Did you mean "name"?`,
	},
}

func TestDiagnostics(t *testing.T) {
	for _, tc := range diagCases {
		t.Run(tc.name, func(t *testing.T) {
			l := playbook.NewLoader(all.Schemas(), nil)
			var diags hcl.Diagnostics
			if tc.file != "" {
				_, diags = l.Load(tc.file)
			} else {
				_, diags = l.LoadSource("main.hcl", []byte(tc.src))
			}
			want := tc.filename
			if want == "" {
				want = "main.hcl"
			}
			var found *hcl.Diagnostic
			for _, d := range diags {
				if d.Severity == hcl.DiagError && strings.Contains(d.Summary, tc.summary) {
					found = d
					break
				}
			}
			if found == nil {
				t.Fatalf("no error %q in:\n%s", tc.summary, diagString(diags))
			}
			s := found.Subject
			if s == nil {
				t.Fatalf("%q has no subject", found.Summary)
			}
			if s.Filename != want || s.Start.Line != tc.line || s.Start.Column != tc.col {
				t.Errorf("%q at %s:%d,%d, want %s:%d,%d", found.Summary, s.Filename, s.Start.Line, s.Start.Column, want, tc.line, tc.col)
			}
			if tc.suggest != "" && !strings.Contains(found.Detail, tc.suggest) {
				t.Errorf("detail %q lacks %q", found.Detail, tc.suggest)
			}
		})
	}
}

// TestValidPlaybooks guards the cases above against passing by accident:
// their fixed versions load cleanly.
func TestValidPlaybooks(t *testing.T) {
	for _, name := range []string{
		filepath.Join("..", "..", "examples", "demo", "site.hcl"),
		diagDir("inc", "good.hcl"),
	} {
		_, diags := playbook.NewLoader(all.Schemas(), nil).Load(name)
		if diags.HasErrors() {
			t.Errorf("%s:\n%s", name, diagString(diags))
		}
	}
	for i, src := range fuzzSeeds[:2] {
		_, diags := playbook.NewLoader(all.Schemas(), nil).LoadSource(diagDir("inc", "fuzz.hcl"), []byte(src))
		if diags.HasErrors() {
			t.Errorf("fuzz seed %d:\n%s", i, diagString(diags))
		}
	}
}

func diagString(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString("  " + d.Error() + "\n")
	}
	return b.String()
}
