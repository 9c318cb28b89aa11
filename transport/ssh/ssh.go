// Package ssh is wsu's SSH transport: it connects to a host with
// golang.org/x/crypto/ssh (host keys verified against known_hosts or a
// pinned key), makes sure the right agent binary is in place (compared by
// sha256; uploaded over SFTP when not, or through an exec session's stdin
// when sshd has no sftp subsystem), starts `wsu agent` and returns the agent
// client as a host.Host. Payload files go over SFTP too (Host.Upload). See
// docs/transports.md.
package ssh

import (
	"context"
	"fmt"
	"sync"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/notify"
)

// Dial is the transport's Dialer: it reads the host's settings from its
// inventory variables and connects.
func Dial(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error) {
	cfg, err := ParseConfig(name, vars)
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	h, err := Connect(ctx, cfg)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return h, nil
}

// Connect opens the SSH connection (retrying within connect_retry_window),
// deploys the agent if needed and starts it.
func Connect(ctx context.Context, cfg Config) (*Host, error) {
	// Hashing the agent binary (tens of MB; once per process) overlaps the
	// handshake and the agent's start instead of preceding them.
	want := sync.OnceValues(func() (string, error) { return fileSHA256(cfg.AgentBinary) })
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
