//go:build linux

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: what the test types goes into master,
// and slave is the terminal wsu reads from (Linux /dev/ptmx, as
// posix_openpt would).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return m, s
}

// wsuAt runs the CLI in-process with stdin a terminal on which typed has
// been typed (nil: stdin is not a terminal).
func wsuAt(t *testing.T, typed *string, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{ctx: context.Background(), stdin: strings.NewReader(""), stdout: &out, stderr: &errb, env: env}
	if typed != nil {
		master, slave := openPTY(t)
		_, err := master.WriteString(*typed)
		require.NoError(t, err)
		a.stdin = slave
	}
	root := a.rootCommand()
	root.SetArgs(normalizeArgs(root, args))
	root.SetOut(&out)
	root.SetErr(&errb)
	code := 0
	if err := root.ExecuteContext(context.Background()); err != nil {
		if ee, ok := err.(exitError); ok {
			code = ee.code
		} else {
			code = 1
			errb.WriteString("Error: " + err.Error() + "\n")
		}
	}
	return code, out.String(), errb.String()
}

const approvePrompt = "Do you want to perform these actions?"

// apply of a playbook on a terminal shows the plan and applies only after
// "yes", as terraform apply does; anything else cancels, changing nothing.
func TestApplyAsksOnATerminal(t *testing.T) {
	dir := t.TempDir()
	pb := writeFile(t, dir, "p.hcl", `
variable "root" {
  type = string
}
play "p" {
  hosts = "all"
  task "marker" {
    file {
      path    = "${var.root}/marker"
      content = "x\n"
    }
  }
}
`)
	root := t.TempDir()
	marker := filepath.Join(root, "marker")
	args := []string{"apply", pb, "--local", "-var", "root=" + root}
	str := func(s string) *string { return &s }

	// stdout is a buffer here (redirected): the question goes to stderr,
	// the terminal, not into the output.
	code, out, errs := wsuAt(t, str("no\n"), nil, args...)
	assert.Equal(t, 1, code, out+errs)
	assert.Contains(t, out, `+ [localhost] task "marker" (file)`, "the plan is shown first")
	assert.Contains(t, out, "Plan: 1 task to change on 1 host.")
	assert.NotContains(t, out, approvePrompt, "the question is not written into redirected output")
	assert.Contains(t, errs, approvePrompt+"\n  wsu will apply the changes in the plan written to standard output to the hosts.\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: ")
	assert.Contains(t, errs, `Error: apply cancelled: only 'yes' approves (got "no"); nothing was changed`)
	assert.NoFileExists(t, marker)

	code, out, errs = wsuAt(t, str("yes\n"), nil, args...)
	assert.Equal(t, 0, code, out+errs)
	assert.Contains(t, errs, approvePrompt)
	assert.Regexp(t, `changed +\[localhost\] task "marker"`, out)
	assert.FileExists(t, marker)

	// Nothing to change: no question.
	code, out, errs = wsuAt(t, str(""), nil, args...)
	assert.Equal(t, 0, code, out+errs)
	assert.Contains(t, out, "No changes. The hosts match the playbook.")
	assert.NotContains(t, out+errs, approvePrompt)
	require.NoError(t, os.Remove(marker))

	// Not asked, applied: --auto-approve (either spelling).
	for _, flag := range []string{"--auto-approve", "-auto-approve"} {
		t.Run(flag, func(t *testing.T) {
			code, out, errs := wsuAt(t, str(""), nil, append(args, flag)...)
			assert.Equal(t, 0, code, out+errs)
			assert.NotContains(t, out+errs, approvePrompt)
			assert.FileExists(t, marker)
			require.NoError(t, os.Remove(marker))
		})
	}

	// Unattended without --auto-approve: refused before any host is
	// touched, saying what to pass (as terraform apply -json does).
	for _, tc := range []struct {
		name  string
		typed *string
		env   []string
		extra []string
		why   string
	}{
		{name: "json", typed: str(""), extra: []string{"-o", "json"}, why: "--output json is read by a program, not a person"},
		{name: "yaml", typed: str(""), extra: []string{"-o", "yaml"}, why: "--output yaml is read by a program, not a person"},
		{name: "CI", typed: str(""), env: []string{"CI=true"}, why: "the environment variable CI is set"},
		{name: "stdin not a terminal", why: "stdin is not a terminal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := wsuAt(t, tc.typed, tc.env, append(args, tc.extra...)...)
			assert.Equal(t, 1, code, out+errs)
			assert.Empty(t, out, "no plan, no events: nothing ran")
			assert.Contains(t, errs, "Error: apply needs approval, and wsu cannot ask for it: "+tc.why+"; nothing was changed. Review the plan (wsu plan) and pass --auto-approve, or save it with `wsu plan -out FILE` and apply that with `wsu apply FILE`")
			assert.NotContains(t, errs, approvePrompt)
			assert.NoFileExists(t, marker)

			code, out, errs = wsuAt(t, tc.typed, tc.env, append(args, append(tc.extra, "--auto-approve")...)...)
			assert.Equal(t, 0, code, out+errs)
			assert.FileExists(t, marker)
			require.NoError(t, os.Remove(marker))
		})
	}

	// A saved plan was reviewed when it was made: applied unattended.
	planFile := filepath.Join(t.TempDir(), "p.plan")
	code, out, errs = wsuAt(t, nil, []string{"CI=1"}, "plan", pb, "--local", "-var", "root="+root, "-out", planFile)
	require.Equal(t, 0, code, out+errs)
	code, out, errs = wsuAt(t, nil, []string{"CI=1"}, "apply", planFile, "-o", "json")
	assert.Equal(t, 0, code, out+errs)
	assert.FileExists(t, marker)

	// --check and --list-tasks change nothing: nothing to approve.
	code, out, errs = wsuAt(t, nil, nil, append(args, "--check")...)
	assert.Equal(t, 0, code, out+errs)
	code, out, errs = wsuAt(t, nil, nil, append(args, "--list-tasks")...)
	assert.Equal(t, 0, code, out+errs)
}

// With stdout a terminal the question follows the plan there.
func TestApplyPromptsOnStdoutWhenItIsATerminal(t *testing.T) {
	_, slave := openPTY(t)
	var errb bytes.Buffer
	a := &app{stdout: slave, stderr: &errb}
	w, above := a.promptTo()
	assert.Equal(t, slave, w)
	assert.True(t, above)
	a.stdout = &bytes.Buffer{}
	w, above = a.promptTo()
	assert.Equal(t, &errb, w)
	assert.False(t, above)
}
