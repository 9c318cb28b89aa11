package playbook_test

import (
	"fmt"
	"testing"

	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/modules/all"
)

func TestExploreDiag(t *testing.T) {
	srcs := []string{
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    print {\n      msg = local.nope\n    }\n  }\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"a\" {\n    print {\n      msg = task.b.msg\n    }\n  }\n  task \"b\" {\n    print {\n      msg = task.c.msg\n    }\n  }\n}\n",
		"play \"p\" {\n  hosts = \n}\n",
		"plya \"p\" {\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    fiel {\n      path = \"/x\"\n    }\n  }\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    file {\n      path = \"/x\"\n      contnet = \"y\"\n    }\n  }\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    file {\n      content = \"y\"\n    }\n  }\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    file {\n      path = \"/x\"\n      mode = [\"x\"]\n    }\n  }\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    command {\n      argv = \"ls\"\n    }\n  }\n}\n",
		"variable \"root\" {\n  type = string\n}\nplay \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    print {\n      msg = var.rot\n    }\n  }\n}\n",
		"locals {\n  a = local.b\n  b = local.a\n}\n",
		"variable \"x\" {\n  default = \"a\"\n  type = number\n}\n",
		"variable \"x\" {\n  type = strng\n}\n",
		"variable \"1x\" {\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    wen = true\n    print {\n      msg = \"x\"\n    }\n  }\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    for_each = 3\n    print {\n      msg = \"x\"\n    }\n  }\n}\n",
		"play \"p\" {\n  hosts = \"all\"\n  task \"t\" {\n    print {\n      msg = each.key\n    }\n  }\n}\n",
	}
	for _, s := range srcs {
		_, diags := playbook.NewLoader(all.Registry(), nil).LoadSource("main.hcl", []byte(s))
		fmt.Printf("----\n%s", s)
		for _, d := range diags {
			fmt.Printf("  %v %q %q %v\n", d.Severity, d.Summary, d.Detail, d.Subject)
		}
	}
}

func TestExploreDiag2(t *testing.T) {
	srcs := []string{
		`play "p" {
  hosts = "all"
  task "a" {
    file {
      path = "/x"
      content = "y"
    }
  }
  task "b" {
    print {
      msg = task.a.nope
    }
  }
}
`,
		`variable "x" {}
variable "x" {}
`,
		`play "p" {
  hosts = "all"
  task "a" {
    print { msg = "1" }
  }
  task "a" {
    print { msg = "2" }
  }
}
`,
		`play "p" {
  hosts = "all"
  task "a" {
    print { msg = "1" }
    notify = ["restart"]
  }
  handler "restart" {
    print { msg = "1" }
  }
  handler "restart" {
    print { msg = "2" }
  }
}
`,
		`play "p" {
  hosts = "all"
  task "a" {
    print { msg = "1" }
    notify = ["restrat"]
  }
  handler "restart" {
    print { msg = "1" }
  }
}
`,
		`play "p" {
  hosts = "all"
  task "a" {
    print { msg = "1" }
    print { msg = "2" }
  }
}
`,
		`play "p" {
  hosts = "all"
  task "a" {
    when = true
  }
}
`,
		`variable "region" {
  default = "eu"
}
play "p" {
  hosts = "all"
  vars = {
    region = "us"
  }
  task "a" {
    print { msg = var.region }
  }
}
`,
		`play "p" {
  hosts = "all"
  task "a" {
    print { msg = self.msg }
  }
}
`,
		`play "p" {
  hosts = "all"
  task "a" {
    print { msg = "x" }
    when = self.msg == "x"
  }
}
`,
	}
	for _, s := range srcs {
		_, diags := playbook.NewLoader(all.Registry(), nil).LoadSource("main.hcl", []byte(s))
		fmt.Printf("----\n%s", s)
		for _, d := range diags {
			fmt.Printf("  %v %q %q %v\n", d.Severity, d.Summary, d.Detail, d.Subject)
		}
	}
	for _, f := range []string{"testdata/diag/cycle/a.hcl", "testdata/diag/inc/missing.hcl", "testdata/diag/inc/badvar.hcl", "testdata/diag/inc/badout.hcl"} {
		_, diags := playbook.NewLoader(all.Registry(), nil).Load(f)
		fmt.Printf("----\n%s\n", f)
		for _, d := range diags {
			fmt.Printf("  %v %q %q %v\n", d.Severity, d.Summary, d.Detail, d.Subject)
		}
	}
}
