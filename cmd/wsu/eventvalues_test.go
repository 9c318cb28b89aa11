package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestJSONChangeValues (issue 31, item 14): a change's fields carry their
// values as JSON (`before`, `after`) beside the display text (`old`,
// `new`, HCL-quoted): a string is a JSON string, a number a number; a
// hidden value has neither and says `sensitive`.
func TestJSONChangeValues(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	conf, secret := filepath.Join(dir, "app.conf"), filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(conf, []byte("old\n"), 0o600))
	require.NoError(t, os.WriteFile("book.hcl", []byte(`
variable "token" {
  type      = string
  sensitive = true
  default   = "Hunter2-very-secret"
}
play "p" {
  hosts = "all"
  task "conf" {
    file {
      path    = "`+conf+`"
      content = "newer\n"
      mode    = "0644"
    }
  }
  task "token" {
    file {
      path    = "`+secret+`"
      content = var.token
    }
  }
}
`), 0o644))

	code, out, errs := wsu(t, nil, "plan", "book.hcl", "--local", "-o", "json")
	require.Equal(t, 0, code, errs)
	fields := map[string]map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e struct {
			Type   string `json:"type"`
			Task   string `json:"task"`
			Change *struct {
				Fields []map[string]any `json:"fields"`
			} `json:"change"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &e), line)
		if e.Type != "task_result" || e.Change == nil {
			continue
		}
		fields[e.Task] = map[string]map[string]any{}
		for _, f := range e.Change.Fields {
			fields[e.Task][f["name"].(string)] = f
		}
	}
	mode := fields["conf"]["mode"]
	require.NotNil(t, mode, "conf's mode changes: %s", out)
	assert.Equal(t, `"0644"`, mode["new"], "display text stays HCL")
	assert.Equal(t, "0644", mode["after"], "the value is a JSON string")
	assert.Equal(t, "0600", mode["before"])
	size := fields["conf"]["size"]
	require.NotNil(t, size, out)
	assert.Equal(t, float64(6), size["after"], "a number is a JSON number")
	assert.Equal(t, float64(4), size["before"])
	assert.Nil(t, mode["sensitive"])

	require.NotEmpty(t, fields["token"], out)
	for name, f := range fields["token"] {
		assert.Equal(t, true, f["sensitive"], "%s of a file with secret content is hidden", name)
		assert.NotContains(t, f, "after", name)
		assert.NotContains(t, f, "before", name)
	}
	assert.NotContains(t, out, "Hunter2")
}
