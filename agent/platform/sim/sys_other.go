//go:build !linux

package sim

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"syscall"
)

// supported: New refuses to run here; these stubs only keep the package
// building on every platform.
const supported = false

var errUnsupported = errors.New("sim: Linux only")

func lockFile(*os.File, bool) error         { return errUnsupported }
func procStat(int) (uint64, bool, error)    { return 0, false, errUnsupported }
func signalGroup(int, syscall.Signal) error { return errUnsupported }
func detach(*exec.Cmd)                      {}
func textBusy(error) bool                   { return false }
func inode(fs.FileInfo) uint64              { return 0 }
