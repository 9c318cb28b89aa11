//go:build linux

// Package harness starts everything an end-to-end join needs, on
// 127.0.0.1 only: a real kube-apiserver and etcd with the cluster parts the
// test bed lacks played visibly (test/kubetest), a real OpenSSH sshd
// (test/sshd), simulated Windows hosts behind it (agent/platform/sim, each
// with its own state directory, host name and IPv4 in 127.0.0.0/8), a
// payload of stand-in binaries (test/payloadtest), and the inventory and
// variable file wsu runs with. The end-to-end tests, the demo and the
// benchmarks share it.
package harness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/zclconf/go-cty/cty"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/host/osfs"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/payload"
	"github.com/wsu-project/wsu/test/kubetest"
	"github.com/wsu-project/wsu/test/payloadtest"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
	"github.com/wsu-project/wsu/test/standin"
	"github.com/wsu-project/wsu/transport/agentbin"
)

// Options choose what Start sets up.
type Options struct {
	// Hosts is how many simulated Windows hosts to start (default 1).
	Hosts int
	// Unreachable adds inventory hosts whose address refuses connections.
	Unreachable []string
	// FaultProxy puts a FaultProxy between wsu and sshd for every host.
	FaultProxy bool
	// Transport is how wsu reaches the hosts: TransportSSH (default: one
	// OpenSSH sshd) or TransportWinRM (a WS-Management test endpoint per
	// host; see Env.WinRM).
	Transport string
	// WSU is the wsu binary to run; empty: built from this module.
	WSU string
	// Payload is passed to payloadtest.Build.
	Payload payloadtest.Options
	// DNSSuffix is the hosts' primary DNS suffix (their FQDN is
	// HOSTNAME.DNSSuffix); "" is "local".
	DNSSuffix string
	// HostEnv (NAME=VALUE) is set in every SSH session, so the agent and
	// the services it starts see it, e.g. WSU_STANDIN_NETWORK_DELAY=0.
	HostEnv []string
	// Network is join's network for the var file: NetworkOVNHybrid
	// (default: the OVN-Kubernetes stand-ins play the hybrid overlay's
	// master) or NetworkHostProcess.
	Network string
	// Cluster adds parts to the control plane (kubetest.WithControllerManager,
	// kubetest.WithScheduler).
	Cluster []kubetest.Option
	// Logf receives progress; nil: silent.
	Logf func(format string, args ...any)
}

// Env is a running set-up. Close stops all of it.
type Env struct {
	// Dir holds everything Start wrote: payload, inventory, var file, keys.
	Dir string
	// UserDir is owned by the SSH user: the hosts' state and agents.
	UserDir string
	// WSU is the wsu binary.
	WSU string
	// Agent is the node agent built for this machine (cmd/wsu-agent): what
	// the WinRM endpoints' simulated hosts run. Over SSH wsu deploys the
	// build it carries or finds beside itself.
	Agent string
	// Cluster is the control plane; Cluster.Kubeconfig the admin's.
	Cluster *kubetest.Cluster
	// SSHD is the OpenSSH server the hosts are reached through.
	SSHD *sshdtest.Server
	// Proxy is the fault proxy, when Options.FaultProxy.
	Proxy *FaultProxy
	// Hosts are the simulated Windows hosts, in inventory order.
	Hosts []*Host
	// PayloadDir holds manifest.json and the stand-in binaries.
	PayloadDir string
	Manifest   *payload.Manifest
	// Inventory and VarFile are what every wsu run gets (-i, --var-file).
	Inventory string
	VarFile   string
	// SSHUser is the account the hosts are logged into.
	SSHUser string
	// KeyFile and KnownHosts are the client key and known_hosts file the
	// inventory names, for other SSH clients (the benchmarks' floor).
	KeyFile, KnownHosts string

	opts Options
	// hostProcessDir holds the HostProcess pod stand-ins (network
	// hostprocess only).
	hostProcessDir string
	winrm          map[*Host]*WinRMHost // TransportWinRM only
	stopParts      context.CancelFunc
	partsDone      chan struct{}
	closeOnce      sync.Once
	uid, gid       int
}

// Host is one simulated Windows host.
type Host struct {
	Name     string // inventory name
	NodeName string // the Node it becomes: the host name, lower-cased
	Hostname string // what the host reports
	FQDN     string // Hostname and the primary DNS suffix (Options.DNSSuffix)
	IPv4     string
	Root     string // the sim state directory

	env *Env
}

// Start sets everything up; on error what was started is stopped again.
func Start(ctx context.Context, opts Options) (_ *Env, err error) {
	if opts.Hosts <= 0 {
		opts.Hosts = 1
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	// envtest logs through controller-runtime's logger; unset, it prints a
	// warning with a stack trace.
	ctrllog.SetLogger(logr.Discard())
	e := &Env{opts: opts, uid: -1, gid: -1}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.Dir, err = os.MkdirTemp("", "wsu-e2e-"); err != nil {
		return nil, err
	}
	if e.WSU = opts.WSU; e.WSU == "" {
		e.WSU = filepath.Join(e.Dir, "bin", "wsu")
		opts.Logf("harness: building wsu")
		if err := BuildWSU(ctx, e.WSU); err != nil {
			return nil, err
		}
	}
	if e.WSU, err = filepath.Abs(e.WSU); err != nil {
		return nil, err
	}
	if e.Agent, err = AgentBeside(ctx, e.WSU, filepath.Join(e.Dir, "bin")); err != nil {
		return nil, err
	}

	opts.Logf("harness: building the payload (stand-in binaries)")
	e.PayloadDir = filepath.Join(e.Dir, "payload")
	if e.Manifest, err = payloadtest.Build(ctx, e.PayloadDir, opts.Payload); err != nil {
		return nil, fmt.Errorf("harness: payload: %w", err)
	}

	clusterOpts := opts.Cluster
	if e.network() == NetworkHostProcess {
		// A kubeadm cluster's controllers, and the scheduler that binds
		// the Windows network's DaemonSet pods to the node.
		clusterOpts = append(clusterOpts, kubetest.WithKubeadmControllers(), kubetest.WithScheduler())
	}
	opts.Logf("harness: starting kube-apiserver and etcd (the first run builds them: minutes)")
	if e.Cluster, err = kubetest.New(ctx, opts.Logf, clusterOpts...); err != nil {
		return nil, err
	}
	if err := e.Cluster.InitKubeadm(ctx); err != nil {
		return nil, err
	}
	// wsu's install on kubeadm: its token group may create CSRs.
	if err := e.Cluster.InstallWSUBootstrappers(ctx); err != nil {
		return nil, err
	}
	parts := kubetest.PartsOptions{}
	if e.network() == NetworkHostProcess {
		// No OVN-Kubernetes: Calico and kube-proxy-windows, as HostProcess
		// DaemonSets the kubelet stand-in runs on the node.
		parts.NoOVNMaster, parts.NoOVNIdentity = true, true
		opts.Logf("harness: installing the Windows network's DaemonSets (calico-node-windows, kube-proxy-windows)")
		if err := e.Cluster.InstallWindowsNetwork(ctx, kubetest.WindowsNetworkOptions{}); err != nil {
			return nil, err
		}
	}
	partsCtx, cancel := context.WithCancel(context.Background())
	e.stopParts, e.partsDone = cancel, make(chan struct{})
	go func() {
		defer close(e.partsDone)
		e.Cluster.RunParts(partsCtx, parts)
	}()

	switch opts.Transport {
	case "", TransportSSH:
	case TransportWinRM:
		opts.Logf("harness: starting a WS-Management endpoint per host on 127.0.0.1")
		if err := e.startWinRM(ctx); err != nil {
			return nil, err
		}
		return e, nil
	default:
		return nil, fmt.Errorf("harness: unknown Transport %q (want %q or %q)", opts.Transport, TransportSSH, TransportWinRM)
	}

	hostEnv := opts.HostEnv
	if e.network() == NetworkHostProcess {
		// Outside Dir (which holds the client key): the SSH user's
		// services (the kubelet stand-in) run them.
		if e.hostProcessDir, err = os.MkdirTemp("", "wsu-hostprocess-"); err != nil {
			return nil, err
		}
		if err := os.Chmod(e.hostProcessDir, 0o755); err != nil {
			return nil, err
		}
		opts.Logf("harness: building the HostProcess pod stand-ins (calicowindows, kubeproxy)")
		if _, err := standin.Build(ctx, e.hostProcessDir, "", "calicowindows", "kubeproxy"); err != nil {
			return nil, fmt.Errorf("harness: hostprocess stand-ins: %w", err)
		}
		hostEnv = append(hostEnv, "WSU_KUBELET_HOSTPROCESS_DIR="+e.hostProcessDir)
	}
	opts.Logf("harness: starting sshd on 127.0.0.1")
	// All hosts share this sshd: it takes a connection from each at once
	// (its default drops unauthenticated ones beyond 10 at random).
	limits := max(opts.Hosts, 10) * 2
	if e.SSHD, err = sshdtest.New(sshdtest.Options{SetEnv: hostEnv, MaxStartups: strconv.Itoa(limits), MaxSessions: limits}); err != nil {
		return nil, err
	}
	if e.SSHUser, e.UserDir, err = sshdtest.FastUser(); err != nil {
		return nil, err
	}
	if u, err := user.Lookup(e.SSHUser); err == nil {
		e.uid, _ = strconv.Atoi(u.Uid)
		e.gid, _ = strconv.Atoi(u.Gid)
	}
	key, err := sshdtest.GenerateKey(e.Dir, sshdtest.KeyOptions{})
	if err != nil {
		return nil, err
	}
	if err := e.SSHD.AuthorizeKey(key.Public); err != nil {
		return nil, err
	}
	knownHosts := filepath.Join(e.Dir, "known_hosts")
	e.KeyFile, e.KnownHosts = key.File, knownHosts
	if err := e.SSHD.WriteKnownHosts(knownHosts); err != nil {
		return nil, err
	}
	addr := e.SSHD.Addr
	if opts.FaultProxy {
		if e.Proxy, err = NewFaultProxy(e.SSHD.Addr); err != nil {
			return nil, err
		}
		addr = e.Proxy.Addr
		// The proxy's port is another [127.0.0.1]:port to know.
		if err := appendKnownHostsFor(knownHosts, e.SSHD, e.Proxy.Addr); err != nil {
			return nil, err
		}
	}

	for i := 1; i <= opts.Hosts; i++ {
		h := e.newHost(i)
		if err := e.WithSim(h, func(*sim.Host) error { return nil }); err != nil {
			return nil, err
		}
		e.Hosts = append(e.Hosts, h)
	}
	if err := e.writeInventory(addr, key.File, knownHosts); err != nil {
		return nil, err
	}
	if err := e.writeVarFile(); err != nil {
		return nil, err
	}
	return e, nil
}

// newHost describes the i-th simulated host (from 1), for either transport.
func (e *Env) newHost(i int) *Host {
	h := &Host{
		Name:     fmt.Sprintf("win-%02d", i),
		Hostname: fmt.Sprintf("WIN-%02d", i),
		IPv4:     fmt.Sprintf("127.0.%d.%d", 10+i/250, 1+i%250),
		Root:     filepath.Join(e.UserDir, fmt.Sprintf("win-%02d", i), "sim"),
		env:      e,
	}
	h.NodeName = strings.ToLower(h.Hostname)
	h.FQDN = h.Hostname + "." + cmp.Or(e.opts.DNSSuffix, "local")
	return h
}

// simIdentity is the agent's arguments giving the simulated host its
// identity (the DNS suffix only when set: the agent's default is "local").
func (e *Env) simIdentity(h *Host) string {
	suffix := ""
	if e.opts.DNSSuffix != "" {
		suffix = " --sim-dns-suffix " + e.opts.DNSSuffix
	}
	return fmt.Sprintf("--sim-hostname %s%s --sim-ipv4 %s", h.Hostname, suffix, h.IPv4)
}

// appendKnownHostsFor records srv's host keys under another address.
func appendKnownHostsFor(path string, srv *sshdtest.Server, addr string) error {
	host, port, _ := net.SplitHostPort(addr)
	var b strings.Builder
	for _, l := range srv.KnownHostsLines() {
		_, rest, _ := strings.Cut(l, " ")
		fmt.Fprintf(&b, "[%s]:%s %s\n", host, port, rest)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func (e *Env) writeInventory(addr, keyFile, knownHosts string) error {
	host, port, _ := net.SplitHostPort(addr)
	var b strings.Builder
	b.WriteString("# Simulated Windows hosts behind a local OpenSSH sshd (written by test/harness).\n[windows]\n")
	for _, h := range e.Hosts {
		dir := filepath.Dir(h.Root)
		// node_ip: the address the admin gives the node (its kubelet's
		// --node-ip, the only IP its serving certificate may name); the
		// hosts share sshd's address, so ansible_host cannot say it.
		fmt.Fprintf(&b, "%s ansible_host=%s ansible_port=%s node_ip=%s wsu_agent_path=%s wsu_agent_args=\"--platform sim --sim-root %s %s\"\n",
			h.Name, host, port, h.IPv4, filepath.Join(dir, "wsu"), h.Root, e.simIdentity(h))
	}
	for _, name := range e.opts.Unreachable {
		// A port nothing listens on: connections are refused at once.
		fmt.Fprintf(&b, "%s ansible_host=127.0.0.1 ansible_port=%d wsu_agent_path=%s\n", name, closedPort(), filepath.Join(e.UserDir, name, "wsu"))
	}
	fmt.Fprintf(&b, `
[windows:vars]
connection=ssh
ansible_user=%s
ansible_ssh_private_key_file=%s
ssh_known_hosts_file=%s
wsu_remote_os=linux
connect_retry_window=0s
reconnect_timeout=60s
`, e.SSHUser, keyFile, knownHosts)
	e.Inventory = filepath.Join(e.Dir, "inventory.ini")
	return os.WriteFile(e.Inventory, []byte(b.String()), 0o644)
}

// closedPort returns a port on 127.0.0.1 that nothing listens on.
func closedPort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func (e *Env) writeVarFile() error {
	// Many hosts joining at once on one machine wait longer for their
	// CSRs and Ready: 2 minutes, and 3 s more per host.
	timeout := 120 + 3*len(e.Hosts)
	vars := fmt.Sprintf(`# Variables for the stock playbooks against the harness cluster.
cluster_flavour = "kubeadm"
%skubeconfig      = %q
payload_dir     = %q
csr_timeout     = %d
ready_timeout   = %d
`, e.networkVar(), e.Cluster.Kubeconfig, e.PayloadDir, timeout, timeout)
	e.VarFile = filepath.Join(e.Dir, "cluster.wsuvars")
	return os.WriteFile(e.VarFile, []byte(vars), 0o644)
}

// The networks a harness join can use (join's network variable).
const (
	NetworkOVNHybrid   = "ovn-hybrid"
	NetworkHostProcess = "hostprocess"
)

// network is the join network the set-up plays.
func (e *Env) network() string { return cmp.Or(e.opts.Network, NetworkOVNHybrid) }

// networkVar is the var file's network line: none for hostprocess, which
// is join's default on kubeadm and what a vanilla user leaves unset.
func (e *Env) networkVar() string {
	if e.network() == NetworkHostProcess {
		return ""
	}
	return fmt.Sprintf("network         = %q\n", e.network())
}

// WithSim opens h's simulated host from this process and calls f. The
// state stays owned by the SSH user, whose agent and services use it.
func (e *Env) WithSim(h *Host, f func(*sim.Host) error) error {
	s, err := sim.New(h.Root, sim.Options{Hostname: h.Hostname, FQDN: h.FQDN, IPv4: h.IPv4})
	if err == nil {
		err = f(s)
	}
	return errors.Join(err, e.chown(filepath.Dir(h.Root)))
}

func (e *Env) chown(dir string) error {
	if e.uid < 0 || e.uid == os.Geteuid() {
		return nil
	}
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return nil // vanished while walking: nothing to fix
		}
		return os.Lchown(p, e.uid, e.gid)
	})
}

// Close stops the hosts' service processes, sshd, the cluster parts and
// the control plane, and removes every file Start wrote.
func (e *Env) Close() error {
	var errs []error
	e.closeOnce.Do(func() {
		for _, h := range e.Hosts {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			errs = append(errs, e.WithSim(h, func(s *sim.Host) error { return s.Shutdown(ctx) }))
			cancel()
		}
		if e.Proxy != nil {
			e.Proxy.Close()
		}
		e.closeWinRM()
		if e.SSHD != nil {
			e.SSHD.Close()
		}
		if e.stopParts != nil {
			e.stopParts()
			<-e.partsDone
		}
		if e.Cluster != nil {
			errs = append(errs, e.Cluster.Stop())
		}
		if e.UserDir != "" {
			os.RemoveAll(e.UserDir)
		}
		if e.Dir != "" {
			os.RemoveAll(e.Dir)
		}
		if e.hostProcessDir != "" {
			os.RemoveAll(e.hostProcessDir)
		}
	})
	return errors.Join(errs...)
}

// ModuleRoot is the directory of this Go module (where go.mod is).
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the wsu module (go env GOMOD is empty)")
	}
	return filepath.Dir(mod), nil
}

// BuildWSU builds cmd/wsu into out and the node agent for this machine
// beside it, under the name make build gives it (agentbin.FileName), where
// that wsu finds it.
func BuildWSU(ctx context.Context, out string) error {
	if err := build(ctx, out, "./cmd/wsu"); err != nil {
		return err
	}
	return build(ctx, filepath.Join(filepath.Dir(out), agentbin.FileName(agentbin.Native())), "./cmd/wsu-agent")
}

// BuildWSUController builds wsu-controller, the cluster face, beside the
// wsu binary at wsu, where `wsu controller` finds it (as make build puts
// both in bin/).
func BuildWSUController(ctx context.Context, wsu string) error {
	return build(ctx, filepath.Join(filepath.Dir(wsu), "wsu-controller"), "./cmd/wsu-controller")
}

// AgentBeside is the node agent for this machine beside the wsu binary
// (make build and BuildWSU put it there), or else one built into dir.
func AgentBeside(ctx context.Context, wsu, dir string) (string, error) {
	p := filepath.Join(filepath.Dir(wsu), agentbin.FileName(agentbin.Native()))
	if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
		return p, nil
	}
	p = filepath.Join(dir, agentbin.FileName(agentbin.Native()))
	return p, build(ctx, p, "./cmd/wsu-agent")
}

// build builds the module's package pkg into out.
func build(ctx context.Context, out, pkg string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// Snapshot is what a host holds that a join may change: every file and
// directory under its drives (files by size and sha256) and the service,
// registry (environment included) and HNS tables. Processes are left out:
// their pids differ from run to run.
func (e *Env) Snapshot(h *Host) (map[string]string, error) {
	snap := map[string]string{}
	fsRoot := filepath.Join(h.Root, "fs")
	err := filepath.Walk(fsRoot, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(fsRoot, p)
		switch {
		case fi.IsDir():
			snap["fs:"+rel] = "dir"
		default:
			sum, err := osfs.FileSHA256(p)
			if err != nil {
				return err
			}
			snap["fs:"+rel] = fmt.Sprintf("file %d %s", fi.Size(), sum)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, table := range []string{"services", "registry", "hns", "firewall"} {
		b, err := os.ReadFile(filepath.Join(h.Root, "state", table+".json"))
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			return nil, err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		// An empty service, HNS or firewall table is the same host as none at all;
		// an empty registry key is not the same as a missing one.
		flatten(snap, "state:"+table, v, table == "registry")
	}
	return snap, nil
}

// flatten records every leaf of v under its path, so a difference names
// the one value that changed.
func flatten(out map[string]string, prefix string, v any, keepEmpty bool) {
	switch v := v.(type) {
	case map[string]any:
		if len(v) == 0 && keepEmpty {
			out[prefix] = "{}"
		}
		for k, x := range v {
			flatten(out, prefix+"."+k, x, keepEmpty)
		}
	case []any:
		if len(v) == 0 && keepEmpty {
			out[prefix] = "[]"
		}
		for i, x := range v {
			flatten(out, fmt.Sprintf("%s[%d]", prefix, i), x, keepEmpty)
		}
	default:
		b, _ := json.Marshal(v)
		out[prefix] = string(b)
	}
}

// BumpPayload rebuilds the payload with one component at a new version
// (only that file's bytes change) and the payload version bumped with it,
// as a release that fixes one binary does.
func (e *Env) BumpPayload(ctx context.Context, component, version string) (*payload.Manifest, error) {
	opts := e.opts.Payload
	bump := map[string]string{}
	for k, v := range opts.Bump {
		bump[k] = v
	}
	bump[component] = version
	opts.Bump = bump
	opts.Version = e.Manifest.Version + "+" + component + "-" + version
	tmp := e.PayloadDir + ".new"
	os.RemoveAll(tmp)
	m, err := payloadtest.Build(ctx, tmp, opts)
	if err != nil {
		return nil, err
	}
	old := e.PayloadDir + ".old"
	os.RemoveAll(old)
	if err := os.Rename(e.PayloadDir, old); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, e.PayloadDir); err != nil {
		return nil, err
	}
	os.RemoveAll(old)
	e.opts.Payload, e.Manifest = opts, m
	return m, nil
}

// InstanceHostVars are the inventory variables the harness gives h (how to
// reach it through the one sshd, and its simulation's arguments) as the
// controller's admin-set host variables hold them (Options.HostVars,
// Options.AddressHostVars; a WindowsInstance may set none of the agent's):
// strings, without the ones the controller sets itself (the key,
// known_hosts, the user, the connection).
func (e *Env) InstanceHostVars(h *Host) (map[string]string, error) {
	inv, diags := inventory.Load(e.Inventory)
	if diags.HasErrors() {
		return nil, diags
	}
	out := map[string]string{}
	for k, v := range inv.HostVars(h.Name) {
		switch k {
		case "ansible_ssh_private_key_file", "ssh_known_hosts_file", "connection", "ansible_user":
			continue
		}
		if v.Value.IsKnown() && !v.Value.IsNull() && v.Value.Type() == cty.String {
			out[k] = v.Value.AsString()
		}
	}
	return out, nil
}
