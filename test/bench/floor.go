//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/wsu-project/wsu/test/harness"
)

// sshCopy is the floor: the system OpenSSH client copies every payload
// file with `ssh host 'cat > file'`, one connection per file, the files of
// a host one after another, the hosts in parallel; into the same sshd, as
// the same user, with the key and known_hosts wsu uses. With oneStream,
// each host gets a single connection instead, all files in one stream
// (`cat > payload.bin`), with the cipher wsu's SSH client picks
// (aes128-gcm; OpenSSH's default is chacha20-poly1305): the bare
// transfer, without a connection per file.
// At most conc hosts copy at once (wsu's --forks in the same row).
// It returns the wall time and the bytes copied (all hosts), and removes
// the copies.
func sshCopy(ctx context.Context, env *harness.Env, hosts []*harness.Host, conc int, oneStream bool) (time.Duration, int64, error) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		return 0, 0, fmt.Errorf("the floor needs the OpenSSH client: %w", err)
	}
	var files []string
	var size int64
	for _, c := range env.Manifest.Components {
		p := filepath.Join(env.PayloadDir, c.File)
		fi, err := os.Stat(p)
		if err != nil {
			return 0, 0, err
		}
		files, size = append(files, p), size+fi.Size()
	}
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(conc, 1))
	start := time.Now()
	for i, h := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			// The host's directory is the SSH user's (the sim state is
			// inside it); the copies go beside the sim state.
			dir := filepath.Dir(h.Root)
			if oneStream {
				errs[i] = catTo(ctx, sshBin, env, files, filepath.Join(dir, "floor-payload.bin"), "-c", "aes128-gcm@openssh.com")
				return
			}
			for _, f := range files {
				if errs[i] = catTo(ctx, sshBin, env, []string{f}, filepath.Join(dir, "floor-"+filepath.Base(f))); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for _, h := range hosts {
		os.Remove(filepath.Join(filepath.Dir(h.Root), "floor-payload.bin"))
		for _, f := range files {
			os.Remove(filepath.Join(filepath.Dir(h.Root), "floor-"+filepath.Base(f)))
		}
	}
	return wall, size * int64(len(hosts)), errors.Join(errs...)
}

// sshTrue is the floor of a run that connects to every host and does
// nothing there: `ssh host true` per host, conc at once, with wsu's cipher.
// It is OpenSSH's handshake, authentication and a session, without an
// agent.
func sshTrue(ctx context.Context, env *harness.Env, hosts []*harness.Host, conc int) (time.Duration, error) {
	sshBin, err := exec.LookPath("ssh")
	if err != nil {
		return 0, fmt.Errorf("the floor needs the OpenSSH client: %w", err)
	}
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, max(conc, 1))
	start := time.Now()
	for i := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			cmd := exec.CommandContext(ctx, sshBin, append(sshArgs(env, "-c", "aes128-gcm@openssh.com"), env.SSHUser+"@"+env.SSHD.Host, "true")...)
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("ssh true: %v\n%s", err, out)
			}
		}()
	}
	wg.Wait()
	return time.Since(start), errors.Join(errs...)
}

// sshArgs are the OpenSSH client's options for the set-up's sshd, key and
// known_hosts, then opts.
func sshArgs(env *harness.Env, opts ...string) []string {
	return append([]string{"-i", env.KeyFile, "-p", strconv.Itoa(env.SSHD.Port),
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
		"-o", "UserKnownHostsFile=" + env.KnownHosts, "-o", "StrictHostKeyChecking=yes"}, opts...)
}

// catTo streams the local files, one after another, into remote.
func catTo(ctx context.Context, sshBin string, env *harness.Env, local []string, remote string, opts ...string) error {
	var readers []io.Reader
	for _, l := range local {
		f, err := os.Open(l)
		if err != nil {
			return err
		}
		defer f.Close()
		readers = append(readers, f)
	}
	var in io.Reader = readers[0]
	if len(readers) > 1 {
		in = io.MultiReader(readers...)
	}
	cmd := exec.CommandContext(ctx, sshBin, append(sshArgs(env, opts...), env.SSHUser+"@"+env.SSHD.Host, "cat > "+remote)...)
	cmd.Stdin = in
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ssh cat > %s: %v\n%s", remote, err, out)
	}
	return nil
}
