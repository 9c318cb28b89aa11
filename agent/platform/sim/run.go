package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osexec"
	"github.com/wsu-project/wsu/host/osnet"
)

// linuxExecutable reports whether the file can run on Linux: an ELF binary
// or a #! script. Anything else (a real PE .exe, payload stand-in bytes)
// can only be simulated.
func linuxExecutable(lp string) bool {
	f, err := os.Open(lp)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	return string(head) == "\x7fELF" || strings.HasPrefix(string(head), "#!")
}

// Run runs argv[0] as the process would on the node: a Windows path is the
// simulated file, run on Linux if it is a Linux executable; anything else
// is a Linux command (so tests can use sh). Dir is a Windows path.
// Otherwise it behaves as transport/local's Run.
func (h *Host) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return host.RunResult{}, errors.New("run: empty argv")
	}
	if err := ctx.Err(); err != nil {
		return host.RunResult{}, err
	}
	name := req.Argv[0]
	r := req
	r.Argv = slices.Clone(req.Argv)
	var bin string
	if isWinPath(name) {
		lp, err := h.LocalPath(name)
		if err != nil {
			return host.RunResult{}, fmt.Errorf("run: %w", err)
		}
		fi, err := os.Stat(lp)
		switch {
		case notExist(err):
			return host.RunResult{}, pathErr("run", name, fmt.Errorf("the system cannot find the file specified (ERROR_FILE_NOT_FOUND): %w", os.ErrNotExist))
		case err != nil:
			return host.RunResult{}, pathErr("run", name, err)
		case fi.IsDir() || !linuxExecutable(lp):
			return host.RunResult{}, fmt.Errorf("run %s: %w", name, host.NotSupported("running a binary that is not a Linux executable", "windows simulation"))
		}
		r.Argv[0], bin = lp, lp
	}
	if req.Dir != "" {
		lp, err := h.LocalPath(req.Dir)
		if err != nil {
			return host.RunResult{}, fmt.Errorf("run %s: working directory: %w", name, err)
		}
		r.Dir = lp
	}
	r.Env = append([]string{EnvRoot + "=" + h.root}, req.Env...)

	if bin != "" {
		h.runMu.Lock()
		h.runBin[bin]++
		h.runMu.Unlock()
		defer func() {
			h.runMu.Lock()
			if h.runBin[bin]--; h.runBin[bin] <= 0 {
				delete(h.runBin, bin)
			}
			h.runMu.Unlock()
		}()
	}
	for try := 1; ; try++ {
		res, err := osexec.Run(ctx, r, osexec.Options{Prepare: osexec.KillProcessGroup})
		if err != nil && textBusy(err) && try < 10 && ctx.Err() == nil {
			time.Sleep(time.Duration(try) * 10 * time.Millisecond)
			continue
		}
		if err != nil && bin != "" {
			err = localNamed{err: err, local: bin, win: name}
		}
		return res, err
	}
}

// localNamed keeps a wrapped error but says the Windows path instead of
// the file that simulates it.
type localNamed struct {
	err        error
	local, win string
}

func (e localNamed) Error() string { return strings.ReplaceAll(e.err.Error(), e.local, e.win) }

func (e localNamed) Unwrap() error { return e.err }

// DialTCP dials from the machine running the simulation: the simulated
// host shares its network.
func (h *Host) DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	return osnet.DialTCP(ctx, address, timeout)
}

// DoHTTP makes the request from the machine running the simulation, which
// shares its network (tests serve stand-ins on 127.0.0.1).
func (h *Host) DoHTTP(ctx context.Context, req host.HTTPRequest) (host.HTTPResponse, error) {
	return osnet.DoHTTP(ctx, req)
}

// NativePath is the file that simulates path (host.NativePather), so a
// transport can reach it over SFTP.
func (h *Host) NativePath(ctx context.Context, path string) (string, error) {
	return h.LocalPath(path)
}
