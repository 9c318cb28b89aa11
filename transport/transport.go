// Package transport opens connections to hosts. Each transport (local, ssh
// and winrm) turns a host's inventory variables into a host.Host. A
// Registry is built for a run with that run's Options (the agent builds
// to deploy): nothing here is process-wide, so runs for different clusters
// can share a process.
package transport

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/transport/agentbin"
	"github.com/wsu-project/wsu/transport/local"
	"github.com/wsu-project/wsu/transport/ssh"
	"github.com/wsu-project/wsu/transport/winrm"
)

// Dialer connects to one host given its inventory variables.
type Dialer func(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error)

// Registry maps connection names (the inventory's `connection` variable)
// to dialers.
type Registry struct{ dialers map[string]Dialer }

// Options are what a run's transports share.
type Options struct {
	// Agents supplies the agent builds: deployed by ssh and winrm to a
	// host that lacks the build (unless wsu_agent_binary names a file),
	// and started by local. nil: only wsu_agent_binary files are deployed,
	// and local serves the host in-process (wsu as a library).
	Agents *agentbin.Source
}

// NewRegistry returns the transports this build supports, for one run.
func NewRegistry(opts Options) *Registry {
	return &Registry{dialers: map[string]Dialer{
		"local": local.Dialer{Agents: opts.Agents}.Dial,
		"ssh":   ssh.Dialer{Agents: opts.Agents}.Dial,
		"winrm": winrm.Dialer{Agents: opts.Agents}.Dial,
	}}
}

// Check finds, without dialling, what can be wrong with a host's
// connection settings: a connection this build lacks, and for ssh and
// winrm any setting their configuration rejects (ansible_port=abc). A run
// calls it for every host before the first play.
func (r *Registry) Check(name string, vars map[string]inventory.Var, def string) error {
	conn := Connection(name, vars, def)
	if _, ok := r.dialers[conn]; !ok {
		var names []string
		for n := range r.dialers {
			names = append(names, n)
		}
		sort.Strings(names)
		return fmt.Errorf("host %s: connection %q is not available in this build of wsu (available: %s)", name, conn, strings.Join(names, ", "))
	}
	var err error
	switch conn {
	case "ssh":
		_, err = ssh.ParseConfig(name, vars)
	case "winrm":
		_, err = winrm.ConfigFromVars(name, vars)
	}
	if err != nil && !strings.Contains(err.Error(), "host "+name) {
		return fmt.Errorf("host %s: %s: %w", name, conn, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", conn, err)
	}
	return nil
}

// Register adds or replaces a transport.
func (r *Registry) Register(name string, d Dialer) { r.dialers[name] = d }

// ConnectionVars are the inventory variables that choose a transport, in
// order of preference: wsu's own name, then Ansible's.
var ConnectionVars = []string{"connection", "ansible_connection"}

// Connection returns the transport a host asks for; def when it names none.
func Connection(name string, vars map[string]inventory.Var, def string) string {
	for _, k := range ConnectionVars {
		if v, ok := vars[k]; ok && v.Value.Type() == cty.String && v.Value.IsKnown() && !v.Value.IsNull() {
			return strings.ToLower(v.Value.AsString())
		}
	}
	if name == "localhost" || name == "127.0.0.1" {
		return "local" // as Ansible's implicit localhost
	}
	return def
}

// Dial connects to a host with the transport its variables name.
func (r *Registry) Dial(ctx context.Context, name string, vars map[string]inventory.Var, def string) (host.Host, error) {
	conn := Connection(name, vars, def)
	d, ok := r.dialers[conn]
	if !ok {
		var names []string
		for n := range r.dialers {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("host %s: connection %q is not available in this build of wsu (available: %s)", name, conn, strings.Join(names, ", "))
	}
	return d(ctx, name, vars)
}
