package wsmantest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wsu-project/wsu/agent/platform/sim"
)

// SimAgent is the Handler for wsu's WinRM transport tests. It emulates
// exactly the commands the transport sends to a Windows host, and nothing
// else, against a simulated Windows host (agent/platform/sim) rooted at
// Root:
//
//   - the agent start, `C:\...\wsu-<version>.exe agent [args]`: when the
//     simulated file exists, it runs that file (a Linux build of wsu-agent) as
//     `agent --platform sim --sim-root Root [args]`, wired to the command's
//     stdin, stdout and stderr; when it does not, it fails as cmd.exe does
//     (exit 9009, "is not recognized as an internal or external command");
//   - the upload bootstrap: a command line equal to
//     fmt.Sprintf(BootstrapFormat, path) for a Windows path: it decodes its
//     stdin from base64 (line breaks ignored) into a temp file beside the
//     simulated path and renames it over the target, as the PowerShell does;
//   - anything else: exit 1 with "unknown command" on stderr.
type SimAgent struct {
	// Root is the simulated host's root directory.
	Root string

	host      *sim.Host
	bootstrap *regexp.Regexp
	format    string
	seq       atomic.Int64
	// Uploads counts completed uploads.
	Uploads atomic.Int64
}

var agentLine = regexp.MustCompile(`^([A-Za-z]:\\\S+?\.(?i:exe)) agent((?: \S+)*)$`)

// NewSimAgent opens the simulated host under root. bootstrapFormat is the
// transport's upload command with a single %s for the target path.
func NewSimAgent(root, bootstrapFormat string) (*SimAgent, error) {
	h, err := sim.New(root, sim.Options{})
	if err != nil {
		return nil, err
	}
	const marker = "\x00PATH\x00"
	parts := strings.Split(fmt.Sprintf(bootstrapFormat, marker), marker)
	if len(parts) != 2 {
		return nil, errors.New("wsmantest: the bootstrap format must hold exactly one %s")
	}
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(parts[0]) + `([A-Za-z]:\\[^'"\s]+)` + regexp.QuoteMeta(parts[1]) + `$`)
	return &SimAgent{Root: root, host: h, bootstrap: re, format: bootstrapFormat}, nil
}

// LocalPath is the Linux file that simulates a Windows path.
func (a *SimAgent) LocalPath(winPath string) (string, error) { return a.host.LocalPath(winPath) }

// Handle implements Handler.
func (a *SimAgent) Handle(ctx context.Context, cmd *Cmd) int {
	if m := a.bootstrap.FindStringSubmatch(cmd.Line); m != nil && fmt.Sprintf(a.format, m[1]) == cmd.Line {
		return a.upload(cmd, m[1])
	}
	if m := agentLine.FindStringSubmatch(cmd.Line); m != nil {
		return a.agent(ctx, cmd, m[1], strings.Fields(m[2]))
	}
	return Unknown(ctx, cmd)
}

func (a *SimAgent) agent(ctx context.Context, cmd *Cmd, exe string, args []string) int {
	lp, err := a.host.LocalPath(exe)
	if err == nil {
		_, err = os.Stat(lp)
	}
	if err != nil {
		fmt.Fprintf(cmd.Stderr, "'%s' is not recognized as an internal or external command,\r\noperable program or batch file.\r\n", exe)
		return 9009
	}
	c := exec.CommandContext(ctx, lp, append([]string{"agent", "--platform", "sim", "--sim-root", a.Root}, args...)...)
	c.Stdout, c.Stderr = cmd.Stdout, cmd.Stderr
	c.WaitDelay = 5 * time.Second
	stdin, err := c.StdinPipe()
	if err != nil {
		fmt.Fprintln(cmd.Stderr, err)
		return 1
	}
	if err := c.Start(); err != nil {
		fmt.Fprintln(cmd.Stderr, err)
		return 1
	}
	go func() {
		io.Copy(stdin, cmd.Stdin)
		stdin.Close() // the client's end of stdin is the agent's EOF
	}()
	err = c.Wait()
	if code := c.ProcessState.ExitCode(); code >= 0 {
		return code
	}
	fmt.Fprintln(cmd.Stderr, err)
	return 1
}

// upload does what the transport's PowerShell bootstrap does.
func (a *SimAgent) upload(cmd *Cmd, target string) int {
	fail := func(err error) int {
		fmt.Fprintf(cmd.Stderr, "upload to %s failed: %v\r\n", target, err)
		return 1
	}
	lp, err := a.host.LocalPath(target)
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(filepath.Dir(lp), 0o755); err != nil {
		return fail(err)
	}
	tmp := fmt.Sprintf("%s.%d.tmp", lp, a.seq.Add(1))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return fail(err)
	}
	// base64.NewDecoder skips \r and \n, as FromBase64Transform does; 1 MB
	// writes, as CopyTo($o,1MB).
	// (struct{ io.Writer } hides File.ReadFrom, which copies 32 KB at a time.)
	_, err = io.CopyBuffer(struct{ io.Writer }{f}, base64.NewDecoder(base64.StdEncoding, cmd.Stdin), make([]byte, 1<<20))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, lp)
	}
	if err != nil {
		os.Remove(tmp)
		return fail(err)
	}
	a.Uploads.Add(1)
	return 0
}
