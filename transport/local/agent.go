package local

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// agentExitGrace is how long Close waits for the agent to exit after its
// input closed before killing it.
const agentExitGrace = 10 * time.Second

// Dialer is the local transport of one run.
type Dialer struct {
	// Agents supplies the agent build for this machine (agentbin.Native),
	// started as a child process. nil (wsu used as a library, the engine's
	// unit tests): the host is served in-process (New).
	Agents *agentbin.Source
}

// Dial connects to this machine: a wsu-agent child process when the
// Dialer has agents, so a local run takes the same path as a remote one
// (the agent protocol, the agent's hash cache, a crash that takes the
// agent down but not the run), else the in-process host.
// wsu_agent_args adds arguments after `agent` (tests: --platform sim).
func (d Dialer) Dial(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error) {
	args, err := agentArgs(vars)
	if err != nil {
		return nil, err
	}
	exe, err := d.Agents.Local()
	if err != nil {
		return nil, fmt.Errorf("host %s: the local agent: %w", name, err)
	}
	if exe == "" {
		if len(args) > 0 {
			v := vars["wsu_agent_args"]
			return nil, fmt.Errorf("%s: wsu_agent_args needs the agent process, which this program (not the wsu command) cannot start", v.Range)
		}
		return New(), nil
	}
	return StartAgent(ctx, exe, args)
}

// Dial is Dialer{}.Dial: the host in-process.
func Dial(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error) {
	return Dialer{}.Dial(ctx, name, vars)
}

// agentArgs reads wsu_agent_args: a list of strings, or one string split at
// spaces.
func agentArgs(vars map[string]inventory.Var) ([]string, error) {
	v, ok := vars["wsu_agent_args"]
	if !ok || v.Value.IsNull() {
		return nil, nil
	}
	bad := fmt.Errorf("%s: wsu_agent_args must be a string or a list of strings", v.Range)
	if !v.Value.IsWhollyKnown() {
		return nil, bad
	}
	t := v.Value.Type()
	switch {
	case t == cty.String:
		return strings.Fields(v.Value.AsString()), nil
	case t.IsListType() || t.IsTupleType():
		var out []string
		for it := v.Value.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() || e.Type() != cty.String {
				return nil, bad
			}
			out = append(out, e.AsString())
		}
		return out, nil
	}
	return nil, bad
}

// agentHost is an agent child process and the client driving it.
type agentHost struct {
	*client.Client
	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
}

// StartAgent runs `exe agent args...` with its stdin and stdout as the
// connection. A start-up failure quotes what the agent wrote on stderr.
func StartAgent(ctx context.Context, exe string, args []string) (host.Host, error) {
	cmd := exec.Command(exe, append([]string{"agent"}, args...)...)
	// Its own process group: a Ctrl-C at the terminal is wsu's to handle
	// (it cancels the requests); the agent ends when its input closes.
	detach(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the local agent: %w", err)
	}
	h := &agentHost{cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(h.exited) }()
	c, err := client.Dial(ctx, stdout, stdin)
	if err != nil {
		stdin.Close()
		h.stop()
		msg := fmt.Sprintf("starting the local agent (%s agent %s): %v", exe, strings.Join(args, " "), err)
		if s := strings.TrimSpace(stderr.String()); s != "" {
			msg += "; it wrote on stderr: " + s
		}
		return nil, fmt.Errorf("%s", msg)
	}
	h.Client = c
	return h, nil
}

// PID is the agent process's.
func (h *agentHost) PID() int { return h.cmd.Process.Pid }

// Close ends the agent's input, so it finishes and exits; one that has not
// exited within the grace period is killed.
func (h *agentHost) Close() error {
	err := h.Client.Close()
	h.stop()
	return err
}

func (h *agentHost) stop() {
	h.once.Do(func() {
		select {
		case <-h.exited:
		case <-time.After(agentExitGrace):
			h.cmd.Process.Kill()
			<-h.exited
		}
	})
}

// lockedBuffer keeps the agent's stderr (the first 4 KiB) for error
// messages; exec writes it from its own goroutine.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := 4<<10 - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
