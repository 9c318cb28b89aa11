package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHostControlCodesEscaped: terminal control codes from the host (a
// file's content in a diff, a command's stderr, a print message) reach
// human output escaped, in plan, apply and show; JSON output keeps them
// exact.
func TestHostControlCodesEscaped(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	target := filepath.Join(dir, "motd")
	// ESC [2J clears the screen; U+202E reverses what follows; a lone CR
	// overwrites the line; U+009B is the C1 CSI.
	hostile := "x\x1b[2J\u202egnp.exe\rfake\u009b\x07"
	require.NoError(t, os.WriteFile(target, []byte("old "+hostile+"\n"), 0o644))
	require.NoError(t, os.WriteFile("msg.txt", []byte(hostile), 0o644))
	require.NoError(t, os.WriteFile("book.hcl", []byte(`
play "p" {
  hosts = "all"
  task "motd" {
    file {
      path    = "`+target+`"
      content = "new\n"
    }
  }
  task "say" {
    print { msg = file("msg.txt") }
  }
  task "fail" {
    command { argv = ["sh", "-c", "printf 'err '; cat `+filepath.Join(dir, "msg.txt")+` >&2; exit 3"] }
  }
}
`), 0o644))
	raw := []string{"\x1b", "\u202e", "\rfake", "\u009b", "\x07"}
	escaped := []string{`\x1b[2J`, `\u202e`, `\x0dfake`, `\x9b`, `\x07`}

	_, out, errs := wsu(t, nil, "plan", "book.hcl", "--local", "-out", "p.plan")
	_, showOut, showErrs := wsu(t, nil, "show", "p.plan")
	_, applyOut, applyErrs := wsu(t, nil, "apply", "book.hcl", "--local", "--auto-approve", "--diff")
	for name, text := range map[string]string{"plan": out + errs, "show": showOut + showErrs, "apply": applyOut + applyErrs} {
		for _, r := range raw {
			assert.NotContains(t, text, r, "%s prints %q raw", name, r)
		}
		for _, e := range escaped {
			assert.Contains(t, text, e, "%s: %s", name, text)
		}
	}
	assert.Contains(t, applyOut+applyErrs, `x\x1b[2J\u202egnp.exe\x0dfake\x9b\x07`, "a command's stderr")
	assert.Contains(t, out, `-old x\x1b[2J\u202egnp.exe\x0dfake\x9b\x07`, "the diff")

	require.NoError(t, os.WriteFile(target, []byte("old "+hostile+"\n"), 0o644))
	_, jsonOut, _ := wsu(t, nil, "plan", "book.hcl", "--local", "-o", "json")
	assert.Contains(t, jsonOut, "\"message\":\"x\\u001b[2J\u202egnp.exe\\rfake\u009b\\u0007\"", "JSON keeps the text exact")
	assert.False(t, strings.Contains(jsonOut, `\\x1b`), "JSON is not escaped twice")
}
