//go:build linux

package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/inventory"
	wsmantest "github.com/wsu-project/wsu/test/wsman"
	"github.com/wsu-project/wsu/transport/winrm"
)

// Transports Options.Transport selects.
const (
	// TransportSSH (the default): every host behind one OpenSSH sshd.
	TransportSSH = "ssh"
	// TransportWinRM: each host behind its own WS-Management test endpoint
	// (test/wsman), HTTPS with its own CA, NTLM.
	TransportWinRM = "winrm"
)

// WinRMHost is what a simulated host is reached through with
// TransportWinRM.
type WinRMHost struct {
	// Server is the host's WS-Management endpoint.
	Server *wsmantest.Server
	// Agent runs the transport's commands against the host's sim root; its
	// Uploads counts agent deployments.
	Agent *wsmantest.SimAgent
	// CAFile is the endpoint's CA, as the inventory's winrm_ca_file.
	CAFile string
}

// WinRM returns how h is reached when the Env runs TransportWinRM, else nil.
func (e *Env) WinRM(h *Host) *WinRMHost { return e.winrm[h] }

// startWinRM is Start's tail for TransportWinRM: hosts named as Start names
// them, each behind a WS-Management endpoint whose SimAgent runs the
// uploaded agent (the Linux wsu-agent, under the Windows agent's path) against
// the host's sim root, and the inventory that reaches them over WinRM.
// There is no sshd and no SSH user: the agents and the services they start
// run as the test's own user.
func (e *Env) startWinRM(ctx context.Context) (err error) {
	if e.opts.FaultProxy {
		return errors.New("harness: FaultProxy is for TransportSSH only")
	}
	if e.UserDir, err = os.MkdirTemp("", "wsu-e2e-hosts-"); err != nil {
		return err
	}
	format, err := winrmBootstrapFormat(ctx, e.Agent, e.Dir)
	if err != nil {
		return err
	}
	e.winrm = map[*Host]*WinRMHost{}
	for i := 1; i <= e.opts.Hosts; i++ {
		h := e.newHost(i)
		if err := e.WithSim(h, func(*sim.Host) error { return nil }); err != nil {
			return err
		}
		w := &WinRMHost{}
		if w.Agent, err = wsmantest.NewSimAgent(h.Root, format); err != nil {
			return err
		}
		// Registered before it can fail, so Close stops what started.
		e.winrm[h] = w
		e.Hosts = append(e.Hosts, h)
		if w.Server, err = wsmantest.Start(wsmantest.Options{Handler: w.Agent.Handle}); err != nil {
			return err
		}
		w.CAFile = filepath.Join(e.Dir, h.Name+"-winrm-ca.pem")
		if err := os.WriteFile(w.CAFile, w.Server.CA.PEM, 0o644); err != nil {
			return err
		}
	}
	if err := e.writeWinRMInventory(); err != nil {
		return err
	}
	return e.writeVarFile()
}

func (e *Env) writeWinRMInventory() error {
	var b strings.Builder
	b.WriteString("# Simulated Windows hosts behind WS-Management test endpoints (written by test/harness).\n[windows]\n")
	var user, password string
	for _, h := range e.Hosts {
		w := e.winrm[h]
		user, password = w.Server.User, w.Server.Password
		// The agent path is the transport's default, C:\k\wsu\wsu-<version>.exe,
		// on the simulated C: drive; the SimAgent adds --platform sim
		// --sim-root, and the arguments give the host its identity.
		// node_ip: the node's address as the admin gives it (writeInventory).
		fmt.Fprintf(&b, "%s ansible_host=%s ansible_port=%d node_ip=%s winrm_ca_file=%s wsu_agent_args=\"%s\"\n",
			h.Name, w.Server.Host, w.Server.Port, h.IPv4, w.CAFile, e.simIdentity(h))
	}
	for _, name := range e.opts.Unreachable {
		fmt.Fprintf(&b, "%s ansible_host=127.0.0.1 ansible_port=%d\n", name, closedPort())
	}
	fmt.Fprintf(&b, `
[windows:vars]
connection=winrm
ansible_user=%s
ansible_password=%s
ansible_winrm_transport=ntlm
wsu_agent_binary=%s
reconnect_timeout=60s
`, user, password, e.Agent)
	e.Inventory = filepath.Join(e.Dir, "inventory.ini")
	return os.WriteFile(e.Inventory, []byte(b.String()), 0o600)
}

// closeWinRM stops the endpoints, and the agents' commands with them.
func (e *Env) closeWinRM() {
	for _, w := range e.winrm {
		if w.Server != nil {
			w.Server.Close()
		}
	}
}

// winrmBootstrapFormat is the WinRM transport's upload command with %s for
// the target path, as wsmantest.NewSimAgent takes it. The transport keeps
// it unexported, and a copy here would drift from it, so it is learnt from
// the transport itself: a connection to an endpoint where the agent is
// missing makes the transport send its upload command, which is recorded
// and refused.
func winrmBootstrapFormat(ctx context.Context, agentBinary, dir string) (string, error) {
	const path = `C:\wsu-harness\probe\wsu-probe.exe`
	var (
		mu    sync.Mutex
		lines []string
	)
	srv, err := wsmantest.Start(wsmantest.Options{Handler: func(_ context.Context, cmd *wsmantest.Cmd) int {
		mu.Lock()
		lines = append(lines, cmd.Line)
		mu.Unlock()
		if strings.HasPrefix(cmd.Line, path+" agent") {
			fmt.Fprintf(cmd.Stderr, "'%s' is not recognized as an internal or external command,\r\noperable program or batch file.\r\n", path)
			return 9009
		}
		fmt.Fprint(cmd.Stderr, "refused: the harness only records this command\r\n")
		return 1
	}})
	if err != nil {
		return "", err
	}
	defer srv.Close()
	ca := filepath.Join(dir, "winrm-probe-ca.pem")
	if err := os.WriteFile(ca, srv.CA.PEM, 0o644); err != nil {
		return "", err
	}
	defer os.Remove(ca)
	vars := map[string]inventory.Var{}
	for k, v := range map[string]string{
		"ansible_host":     srv.Host,
		"ansible_port":     strconv.Itoa(srv.Port),
		"ansible_user":     srv.User,
		"ansible_password": srv.Password,
		"winrm_ca_file":    ca,
		"wsu_agent_path":   path,
		"wsu_agent_binary": agentBinary,
	} {
		vars[k] = inventory.Var{Value: cty.StringVal(v)}
	}
	dctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	h, err := winrm.Dial(dctx, "probe", vars)
	if err == nil {
		h.Close()
		return "", errors.New("harness: learning the WinRM upload command: the transport connected to an endpoint without an agent")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range lines {
		if !strings.HasPrefix(l, path+" agent") && strings.Count(l, path) == 1 {
			return strings.Replace(strings.ReplaceAll(l, "%", "%%"), path, "%s", 1), nil
		}
	}
	return "", fmt.Errorf("harness: learning the WinRM upload command: the transport sent %q (%v)", lines, err)
}
