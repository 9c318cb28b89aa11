package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// supported: the simulation needs flock, setsid and /proc.
const supported = true

func lockFile(f *os.File, exclusive bool) error {
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		if err := unix.Flock(int(f.Fd()), how); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// procStat returns a process's start time and whether it still runs (a
// zombie does not: it has exited, only its parent has not reaped it).
func procStat(pid int) (start uint64, running bool, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false, err
	}
	// The command name may hold spaces and parentheses: fields start after
	// the last ')'. State is field 3, starttime field 22.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false, fmt.Errorf("pid %d: malformed stat", pid)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 20 {
		return 0, false, fmt.Errorf("pid %d: malformed stat", pid)
	}
	start, err = strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("pid %d: malformed stat: %w", pid, err)
	}
	st := f[0][0]
	return start, st != 'Z' && st != 'X' && st != 'x', nil
}

// signalGroup signals a process's group (services run in their own
// session, so the group is the service and its children), falling back to
// the process alone if it left its group.
func signalGroup(pid int, sig syscall.Signal) error {
	err := unix.Kill(-pid, sig)
	if errors.Is(err, unix.ESRCH) {
		err = unix.Kill(pid, sig)
	}
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	return err
}

// detach starts a service in its own session: it must outlive the agent
// that started it, as a Windows service outlives its SCM client.
func detach(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} }

// textBusy: a concurrent fork may briefly hold a just-written binary open
// for writing, and exec then fails with ETXTBSY; retrying is the cure.
func textBusy(err error) bool { return errors.Is(err, syscall.ETXTBSY) }

// inode identifies the file behind a path: a write renames a new one over it.
func inode(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}
