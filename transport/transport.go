// Package transport opens connections to hosts. Each transport (local, ssh
// and winrm) turns a host's inventory variables into a host.Host.
package transport

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/transport/local"
	"github.com/wsu-project/wsu/transport/ssh"
	"github.com/wsu-project/wsu/transport/winrm"
)

// Dialer connects to one host given its inventory variables.
type Dialer func(ctx context.Context, name string, vars map[string]inventory.Var) (host.Host, error)

// Registry maps connection names (the inventory's `connection` variable)
// to dialers.
type Registry struct{ dialers map[string]Dialer }

// NewRegistry returns the transports this build supports.
func NewRegistry() *Registry {
	return &Registry{dialers: map[string]Dialer{
		"local": local.Dial,
		"ssh":   ssh.Dial,
		"winrm": winrm.Dial,
	}}
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
