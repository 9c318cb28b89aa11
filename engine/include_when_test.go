package engine_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/engine"
)

// includeWhenFiles: an include switched per host by a host variable, with
// a nested include and an output the includer reads.
func includeWhenFiles() map[string]string {
	return map[string]string{
		"play.hcl": rootVar + `
include "overlay" {
  source = "./lib/overlay.hcl"
  when   = try(host.vars.overlay, "on") == "on"
  vars = {
    root   = var.root
    prefix = host.name
  }
}
play "after" {
  hosts = "all"
  task "subnet" {
    print { msg = include.overlay.subnet == null ? "none" : include.overlay.subnet }
  }
}`,
		"lib/overlay.hcl": `
variable "root" {
  type = string
}
variable "prefix" {
  type = string
}
play "overlay" {
  hosts = "all"
  task "write" {
    file {
      path    = "${var.root}/${var.prefix}-overlay"
      content = "x"
    }
    notify = ["after write"]
  }
  handler "after write" {
    file {
      path    = "${var.root}/${var.prefix}-handler"
      content = "y"
    }
  }
}
include "inner" {
  source = "./inner.hcl"
  vars = {
    root   = var.root
    prefix = var.prefix
  }
}
output "subnet" {
  value = "10.0.0.0/24"
}`,
		"lib/inner.hcl": `
variable "root" {
  type = string
}
variable "prefix" {
  type = string
}
play "inner" {
  hosts = "all"
  task "inner write" {
    file {
      path    = "${var.root}/${var.prefix}-inner"
      content = "z"
    }
  }
}`,
	}
}

func TestIncludeWhenSwitchesAPlaybookPerHost(t *testing.T) {
	f := newFixture(t, includeWhenFiles())
	f.inv = "[windows]\non connection=local\noff connection=local overlay=off\n"
	res, rec := f.run(engine.ModeApply)
	require.False(t, res.Failed(), "%v", res.Diagnostics)

	for _, name := range []string{"on-overlay", "on-handler", "on-inner"} {
		assert.FileExists(t, filepath.Join(f.root, name))
	}
	for _, name := range []string{"off-overlay", "off-handler", "off-inner"} {
		_, err := os.Stat(filepath.Join(f.root, name))
		assert.True(t, os.IsNotExist(err), "%s written on the host whose include is off", name)
	}
	for _, task := range []string{"write", "inner write"} {
		assert.Equal(t, engine.StatusSkipped, rec.result(t, "off", task).Status, task)
		assert.Contains(t, rec.result(t, "off", task).Message, "include is off")
		assert.NotEqual(t, engine.StatusSkipped, rec.result(t, "on", task).Status, task)
	}
	assert.Equal(t, `include.overlay.include.inner.task["inner write"]`, rec.result(t, "off", "inner write").Address)
	assert.Equal(t, "10.0.0.0/24", rec.result(t, "on", "subnet").Message)
	assert.Equal(t, "none", rec.result(t, "off", "subnet").Message, "an off include's outputs read as null")
	for _, rc := range res.Recap {
		if rc.Host == "off" {
			assert.Equal(t, 2, rc.Skipped)
		}
	}
}

func TestIncludeWhenPlansSkipped(t *testing.T) {
	f := newFixture(t, includeWhenFiles())
	f.inv = "[windows]\noff connection=local overlay=off\n"
	res, rec := f.run(engine.ModePlan)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, engine.StatusSkipped, rec.result(t, "off", "write").Status)
	task := res.Plan.Hosts["off"]
	require.NotNil(t, task)
	var statuses []string
	for _, pt := range task.Tasks {
		if pt.Address == `include.overlay.task["write"]` {
			statuses = append(statuses, pt.Status)
		}
	}
	assert.Equal(t, []string{"skipped"}, statuses)
}

func TestIncludeWhenInvalid(t *testing.T) {
	files := includeWhenFiles()
	files["play.hcl"] = rootVar + `
include "overlay" {
  source = "./lib/overlay.hcl"
  when   = "maybe"
  vars = {
    root   = var.root
    prefix = host.name
  }
}`
	f := newFixture(t, files)
	res, rec := f.run(engine.ModeApply)
	require.True(t, res.Failed())
	var got []engine.DiagnosticView
	for _, e := range rec.events {
		if e.Type == engine.EventHostFailed {
			got = append(got, e.Diagnostics...)
		}
	}
	require.Len(t, got, 1)
	assert.Equal(t, "Invalid when", got[0].Summary)
	require.NotNil(t, got[0].Range)
	assert.Equal(t, 8, got[0].Range.Line)
	assert.Equal(t, 12, got[0].Range.Column)
	_, err := os.Stat(filepath.Join(f.root, "localhost-overlay"))
	assert.True(t, os.IsNotExist(err), "nothing of the include ran")
}
