//go:build linux

package main

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain lets a test run this package's main as the real wsu process
// (WSU_TEST_RUN_MAIN=1): signals then reach it as they would from a shell.
func TestMain(m *testing.M) {
	if os.Getenv("WSU_TEST_RUN_MAIN") == "1" {
		// The run's local agent is this binary again, started as
		// `<test binary> agent`: it keeps its own arguments.
		if len(os.Args) < 2 || os.Args[1] != "agent" {
			os.Args = append([]string{"wsu"}, strings.Fields(os.Getenv("WSU_TEST_ARGS"))...)
		}
		main()
		return
	}
	os.Exit(m.Run())
}

// TestInterruptStopsCleanly: Ctrl-C (SIGINT) during a task ends the run
// with an error, runs no further task, and says so in the recap.
func TestInterruptStopsCleanly(t *testing.T) {
	dir, root := t.TempDir(), t.TempDir()
	pb := filepath.Join(dir, "play.hcl")
	require.NoError(t, os.WriteFile(pb, []byte(`
variable "root" {
  type = string
}
play "p" {
  hosts = "all"
  task "slow" {
    command { argv = ["sleep", "60"] }
  }
  task "after" {
    file {
      path    = "${var.root}/after"
      content = "should not be written"
    }
  }
}
`), 0o644))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WSU_TEST_RUN_MAIN=1",
		"WSU_TEST_ARGS=apply "+pb+" --local --auto-approve --output json -var root="+root)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var events []string
	sc := bufio.NewScanner(stdout)
	signalled, sleeper := false, 0
	for sc.Scan() {
		line := sc.Text()
		events = append(events, line)
		if !signalled && strings.Contains(line, `"type":"play_start"`) {
			// The JSON view does not show task starts: wait until the
			// slow task's process runs under wsu.
			require.Eventually(t, func() bool {
				sleeper = descendant(cmd.Process.Pid, "sleep\x0060\x00")
				return sleeper != 0
			}, time.Minute, 20*time.Millisecond)
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			signalled = true
		}
	}
	err = cmd.Wait()
	require.True(t, signalled, "the slow task never started:\n%s", strings.Join(events, "\n"))
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "an interrupted run exits non-zero")
	assert.NotEqual(t, 0, exit.ExitCode())
	all := strings.Join(events, "\n")
	assert.NotContains(t, all, `"task":"after"`, "no task starts after the interrupt")
	assert.NoFileExists(t, filepath.Join(root, "after"))
	assert.Contains(t, all, `"type":"recap"`, "the run still ends with its recap")
	// Orphans are re-parented, so look for the sleep by the pid it had.
	assert.False(t, alive(sleeper), "the interrupted command (pid %d) does not outlive wsu", sleeper)
}

// descendant returns the pid of a process below pid with exactly cmdline
// (NUL-separated, as /proc shows it), or 0.
func descendant(pid int, cmdline string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cl, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || string(cl) != cmdline {
			continue
		}
		for q := p; q > 1; q = parentPID(q) {
			if q == pid {
				return p
			}
		}
	}
	return 0
}

// alive: pid runs (a zombie waiting to be reaped does not count).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func parentPID(pid int) int {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: comm may hold spaces, so split after ")".
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// TestInterruptWhileConnectingIsNotUnreachable: Ctrl-C while wsu waits on
// a host's SSH handshake ends the run as interrupted; the host is not
// reported or counted unreachable (it never got the chance to answer).
func TestInterruptWhileConnectingIsNotUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() { // accepts, never speaks SSH: the handshake waits
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	pb := filepath.Join(t.TempDir(), "play.hcl")
	require.NoError(t, os.WriteFile(pb, []byte(`
play "p" {
  hosts = "all"
  task "look" {
    file {
      path    = "/tmp/wsu-interrupt-never"
      content = "x"
    }
  }
}
`), 0o644))
	inv := filepath.Join(t.TempDir(), "inv.ini")
	require.NoError(t, os.WriteFile(inv, []byte("win01 ansible_host=127.0.0.1 ansible_port="+port+" ansible_user=admin ansible_password=not-used wsu_agent_binary="+os.Args[0]+"\n"), 0o600))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "WSU_TEST_RUN_MAIN=1", "HOME="+t.TempDir(),
		"WSU_TEST_ARGS=plan "+pb+" -i "+inv+" --output json")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var events []string
	sc := bufio.NewScanner(stdout)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		events = append(events, line)
		if !signalled && strings.Contains(line, `"type":"play_start"`) {
			time.Sleep(500 * time.Millisecond) // in the handshake
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			signalled = true
		}
	}
	err = cmd.Wait()
	all := strings.Join(events, "\n")
	require.True(t, signalled, "the play never started:\n%s", all)
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "an interrupted run exits non-zero")
	assert.Contains(t, all, `"type":"run_cancelled"`)
	assert.NotContains(t, all, `"type":"host_unreachable"`, "interrupted, not unreachable")
	assert.NotContains(t, all, `"unreachable":1`)
	assert.Contains(t, all, `"type":"recap"`)
}
