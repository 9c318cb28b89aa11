// Package ssh is wsu's SSH transport: it connects to a host with
// golang.org/x/crypto/ssh (host keys verified against known_hosts or a
// pinned key), makes sure the right agent binary is in place (the run's
// wsu-agent build for the host's platform, transport/agentbin; compared by
// sha256; uploaded over SFTP when not, or through an exec session's stdin
// when sshd has no sftp subsystem), starts it and returns the agent client
// as a host.Host. Payload files go over SFTP too (Host.Upload). See
// docs/transports.md.
package ssh

import (
	"context"
	"fmt"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/notify"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// Dialer is the SSH transport of one run.
type Dialer struct {
	// Agents supplies the agent build for a host's platform
	// (wsu_remote_os, amd64) unless wsu_agent_binary names a file. nil:
	// wsu_agent_binary must.
	Agents *agentbin.Source
}

// Dial is the transport's Dialer: it reads the host's settings from its
// inventory variables, picks the agent build and connects.
func (d Dialer) Dial(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error) {
	cfg, err := ParseConfig(name, vars)
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	if cfg.Agent, err = d.Agents.Resolve(cfg.AgentBinary, agentbin.Platform{OS: cfg.RemoteOS, Arch: RemoteArch}); err != nil {
		return nil, fmt.Errorf("ssh: host %s: %w", name, err)
	}
	h, err := Connect(ctx, cfg)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return h, nil
}

// Dial is Dialer{}.Dial: the agent to deploy is the file wsu_agent_binary
// names.
func Dial(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error) {
	return Dialer{}.Dial(ctx, name, vars)
}

// RemoteArch is the architecture of the agent build deployed: wsu manages
// amd64 hosts.
const RemoteArch = "amd64"

// Connect opens the SSH connection (retrying within connect_retry_window),
// deploys the agent (cfg.Agent, or the file cfg.AgentBinary) if needed and
// starts it.
func Connect(ctx context.Context, cfg Config) (*Host, error) {
	if cfg.Agent == nil {
		if cfg.AgentBinary == "" {
			return nil, fmt.Errorf("ssh: host %s: no agent binary to deploy: set wsu_agent_binary", cfg.Name)
		}
		cfg.Agent = agentbin.File(cfg.AgentBinary)
	}
	// Hashing the agent binary (once per build and run: the Binary keeps
	// it) overlaps the handshake and the agent's start instead of
	// preceding them.
	want := cfg.Agent.SHA256
	go want()
	c, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a, err := startOrDeploy(ctx, c, cfg, want)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ssh: host %s: %w", cfg.Name, err)
	}
	h := &Host{cfg: cfg, conn: c, agent: a}
	if a.deployMethod == deployExec {
		// Works, but the admin should know the host's sshd lacks SFTP:
		// payload uploads fall back to the slower agent stream too.
		cfg.notifier(ctx)(notify.Notice{Kind: notify.Warning, Host: cfg.Name, Summary: h.AgentDeployNote()})
	}
	return h, nil
}
