package ssh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
)

// Host is a wsu agent reached over SSH. Every method is one request to the
// agent, bounded by op_timeout; it implements host.Lossy.
type Host struct {
	cfg   Config
	conn  *conn
	agent *agentSession

	closeOnce sync.Once
}

var (
	_ host.Host      = (*Host)(nil)
	_ host.Lossy     = (*Host)(nil)
	_ host.Metered   = (*Host)(nil)
	_ host.Firewall  = (*Host)(nil)
	_ host.CertStore = (*Host)(nil)

	_ host.KeyAuthenticated = (*Host)(nil)
	_ host.Rebooter         = (*Host)(nil)
	_ host.OptionalFeatures = (*Host)(nil)
)

// Counters are the agent client's (round trips, fs.write content) plus the
// agent binary this connection uploaded over SFTP, as AgentBytes.
func (h *Host) Counters() host.Counters {
	c := h.agent.client.Counters()
	c.AgentBytes += h.agent.uploaded
	c.BytesSent += h.agent.up.sent.Load() // payload sent over SFTP (upload.go)
	return c
}

// LoginPublicKey is the public key this connection logged in with, in
// authorized_keys form without a comment ("ssh-ed25519 AAAA..."), or ""
// when it used none wsu configured (host.KeyAuthenticated).
func (h *Host) LoginPublicKey() string {
	if h.conn.loginKey == nil {
		return ""
	}
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(h.conn.loginKey)))
}

// Config returns the settings the host was dialled with.
func (h *Host) Config() Config { return h.cfg }

// Hello is what the agent said about itself in the start-up.
func (h *Host) Hello() proto.Hello { return h.agent.client.Hello() }

// Lost reports whether the SSH connection or the agent's stream has died
// (not closed by Close): the engine then reconnects.
func (h *Host) Lost() bool {
	if dead, err := h.conn.dead(); dead && err != errClosedByUs {
		return true
	}
	return h.agent.client.Lost()
}

// Close ends the agent, its session and the SSH connection(s).
func (h *Host) Close() error {
	h.closeOnce.Do(func() {
		grace := 2 * time.Second
		if dead, _ := h.conn.dead(); dead {
			grace = 0
		}
		h.agent.close(grace)
		h.conn.Close()
	})
	return nil
}

// errStalled is the cause of a context ended by op_timeout.
var errStalled = errors.New("op_timeout")

// call runs one agent request under op_timeout (plus the request's own
// timeout, if it has one). When op_timeout fires, the connection is in an
// unknown state: it is dropped, so the engine reconnects and runs the task
// again.
func (h *Host) call(ctx context.Context, op string, own time.Duration, f func(context.Context) error) error {
	// A connection already known dead fails fast: the agent client may not
	// have noticed yet, and a call it answers from memory (Facts) would
	// otherwise succeed on a connection the engine must replace.
	if dead, why := h.conn.dead(); dead && why != errClosedByUs {
		return h.explain(fmt.Errorf("%s: %w", op, host.ErrConnectionLost))
	}
	limit := time.Duration(0)
	if h.cfg.OpTimeout > 0 {
		limit = h.cfg.OpTimeout + max(own, 0)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, limit, errStalled)
		defer cancel()
	}
	err := f(ctx)
	if err == nil {
		return nil
	}
	if context.Cause(ctx) == errStalled {
		reason := fmt.Errorf("%s got no answer from the agent within op_timeout (%s)", op, limit)
		h.conn.fail(reason)
		return fmt.Errorf("%w: ssh: host %s: %v; the connection seems stalled, so wsu dropped it (raise op_timeout if the operation is legitimately slower)",
			host.ErrConnectionLost, h.cfg.Name, reason)
	}
	return h.explain(err)
}

// explain adds why the SSH connection died to an error, and makes every
// error after that wrap host.ErrConnectionLost.
func (h *Host) explain(err error) error {
	dead, why := h.conn.dead()
	if !dead || why == errClosedByUs {
		return err
	}
	if errors.Is(err, host.ErrConnectionLost) {
		return fmt.Errorf("%w (%v)", err, why)
	}
	return fmt.Errorf("%w: %w (%v)", host.ErrConnectionLost, err, why)
}

// do1 adapts a method returning a value and an error to call.
func do1[T any](ctx context.Context, h *Host, op string, own time.Duration, f func(context.Context) (T, error)) (T, error) {
	var v T
	err := h.call(ctx, op, own, func(ctx context.Context) error {
		var err error
		v, err = f(ctx)
		return err
	})
	return v, err
}

func (h *Host) Facts(ctx context.Context) (host.Facts, error) {
	return do1(ctx, h, "facts", 0, h.agent.client.Facts)
}

func (h *Host) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	return do1(ctx, h, "fs.stat", 0, func(ctx context.Context) (host.FileInfo, error) { return h.agent.client.Stat(ctx, path) })
}

func (h *Host) SHA256(ctx context.Context, path string) (string, error) {
	return do1(ctx, h, "fs.sha256", 0, func(ctx context.Context) (string, error) { return h.agent.client.SHA256(ctx, path) })
}

func (h *Host) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	return do1(ctx, h, "fs.read", 0, func(ctx context.Context) ([]byte, error) { return h.agent.client.ReadFile(ctx, path, limit) })
}

func (h *Host) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	return h.call(ctx, "fs.write", 0, func(ctx context.Context) error { return h.agent.client.WriteFile(ctx, path, content, mode) })
}

func (h *Host) MkdirAll(ctx context.Context, path string, mode fs.FileMode) error {
	return h.call(ctx, "fs.mkdir", 0, func(ctx context.Context) error { return h.agent.client.MkdirAll(ctx, path, mode) })
}

func (h *Host) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	return h.call(ctx, "fs.chmod", 0, func(ctx context.Context) error { return h.agent.client.Chmod(ctx, path, mode) })
}

func (h *Host) Remove(ctx context.Context, path string, recursive bool) error {
	return h.call(ctx, "fs.remove", 0, func(ctx context.Context) error { return h.agent.client.Remove(ctx, path, recursive) })
}

func (h *Host) ReadDir(ctx context.Context, path string, limit int) ([]host.DirEntry, error) {
	return do1(ctx, h, "fs.list", 0, func(ctx context.Context) ([]host.DirEntry, error) { return h.agent.client.ReadDir(ctx, path, limit) })
}

func (h *Host) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	return do1(ctx, h, "proc.run", req.Timeout, func(ctx context.Context) (host.RunResult, error) { return h.agent.client.Run(ctx, req) })
}

func (h *Host) ListProcesses(ctx context.Context) ([]host.Process, error) {
	return do1(ctx, h, "proc.list", 0, h.agent.client.ListProcesses)
}

func (h *Host) Kill(ctx context.Context, pid int, image string) (int, error) {
	return do1(ctx, h, "proc.kill", 0, func(ctx context.Context) (int, error) { return h.agent.client.Kill(ctx, pid, image) })
}

func (h *Host) QueryService(ctx context.Context, name string) (host.ServiceInfo, error) {
	return do1(ctx, h, "svc.query", 0, func(ctx context.Context) (host.ServiceInfo, error) { return h.agent.client.QueryService(ctx, name) })
}

func (h *Host) CreateService(ctx context.Context, cfg host.ServiceConfig) error {
	return h.call(ctx, "svc.create", 0, func(ctx context.Context) error { return h.agent.client.CreateService(ctx, cfg) })
}

func (h *Host) UpdateService(ctx context.Context, cfg host.ServiceConfig) error {
	return h.call(ctx, "svc.update", 0, func(ctx context.Context) error { return h.agent.client.UpdateService(ctx, cfg) })
}

func (h *Host) SetServiceRecovery(ctx context.Context, name string, r host.ServiceRecovery) error {
	return h.call(ctx, "svc.recovery", 0, func(ctx context.Context) error { return h.agent.client.SetServiceRecovery(ctx, name, r) })
}

func (h *Host) StartService(ctx context.Context, name string) error {
	return h.call(ctx, "svc.start", 0, func(ctx context.Context) error { return h.agent.client.StartService(ctx, name) })
}

func (h *Host) StopService(ctx context.Context, name string, timeout time.Duration) error {
	return h.call(ctx, "svc.stop", timeout, func(ctx context.Context) error { return h.agent.client.StopService(ctx, name, timeout) })
}

func (h *Host) DeleteService(ctx context.Context, name string, timeout time.Duration) error {
	return h.call(ctx, "svc.delete", timeout, func(ctx context.Context) error { return h.agent.client.DeleteService(ctx, name, timeout) })
}

func (h *Host) WaitService(ctx context.Context, name string, state host.ServiceState, timeout time.Duration) error {
	return h.call(ctx, "svc.wait", timeout, func(ctx context.Context) error { return h.agent.client.WaitService(ctx, name, state, timeout) })
}

func (h *Host) DependentServices(ctx context.Context, name string) ([]host.ServiceStatus, error) {
	return do1(ctx, h, "svc.dependents", 0, func(ctx context.Context) ([]host.ServiceStatus, error) {
		return h.agent.client.DependentServices(ctx, name)
	})
}

func (h *Host) RegistryGet(ctx context.Context, key, name string) (host.RegistryValue, error) {
	return do1(ctx, h, "reg.get", 0, func(ctx context.Context) (host.RegistryValue, error) {
		return h.agent.client.RegistryGet(ctx, key, name)
	})
}

func (h *Host) RegistrySet(ctx context.Context, key, name string, v host.RegistryValue) error {
	return h.call(ctx, "reg.set", 0, func(ctx context.Context) error { return h.agent.client.RegistrySet(ctx, key, name, v) })
}

func (h *Host) RegistryDelete(ctx context.Context, key, name string) error {
	return h.call(ctx, "reg.delete", 0, func(ctx context.Context) error { return h.agent.client.RegistryDelete(ctx, key, name) })
}

func (h *Host) EnvGet(ctx context.Context, name string) (string, bool, error) {
	var exists bool
	v, err := do1(ctx, h, "env.get", 0, func(ctx context.Context) (string, error) {
		v, ok, err := h.agent.client.EnvGet(ctx, name)
		exists = ok
		return v, err
	})
	return v, exists, err
}

func (h *Host) EnvSet(ctx context.Context, name, value string) error {
	return h.call(ctx, "env.set", 0, func(ctx context.Context) error { return h.agent.client.EnvSet(ctx, name, value) })
}

func (h *Host) EnvDelete(ctx context.Context, name string) error {
	return h.call(ctx, "env.delete", 0, func(ctx context.Context) error { return h.agent.client.EnvDelete(ctx, name) })
}

func (h *Host) PathAdd(ctx context.Context, dir string) (bool, error) {
	return do1(ctx, h, "path.add", 0, func(ctx context.Context) (bool, error) { return h.agent.client.PathAdd(ctx, dir) })
}

func (h *Host) PathRemove(ctx context.Context, dir string) (bool, error) {
	return do1(ctx, h, "path.remove", 0, func(ctx context.Context) (bool, error) { return h.agent.client.PathRemove(ctx, dir) })
}

func (h *Host) HNSNetworks(ctx context.Context) ([]host.HNSNetwork, error) {
	return do1(ctx, h, "hns.networks", 0, h.agent.client.HNSNetworks)
}

func (h *Host) HNSEndpoints(ctx context.Context) ([]host.HNSEndpoint, error) {
	return do1(ctx, h, "hns.endpoints", 0, h.agent.client.HNSEndpoints)
}

func (h *Host) HNSCreateEndpoint(ctx context.Context, spec host.HNSEndpoint) (host.HNSEndpoint, error) {
	return do1(ctx, h, "hns.endpoint.create", 0, func(ctx context.Context) (host.HNSEndpoint, error) {
		return h.agent.client.HNSCreateEndpoint(ctx, spec)
	})
}

func (h *Host) HNSDeleteEndpoint(ctx context.Context, id string) error {
	return h.call(ctx, "hns.endpoint.delete", 0, func(ctx context.Context) error { return h.agent.client.HNSDeleteEndpoint(ctx, id) })
}

func (h *Host) Reboot(ctx context.Context, req host.RebootRequest) error {
	return h.call(ctx, "sys.reboot", 0, func(ctx context.Context) error { return h.agent.client.Reboot(ctx, req) })
}

func (h *Host) OptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	return do1(ctx, h, "feature.get", host.FeatureOpTimeout, func(ctx context.Context) (host.FeatureInfo, error) {
		return h.agent.client.OptionalFeature(ctx, name)
	})
}

func (h *Host) EnableOptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	return do1(ctx, h, "feature.enable", host.FeatureOpTimeout, func(ctx context.Context) (host.FeatureInfo, error) {
		return h.agent.client.EnableOptionalFeature(ctx, name)
	})
}

func (h *Host) Certificates(ctx context.Context, store string) ([]string, error) {
	return do1(ctx, h, "cert.list", 0, func(ctx context.Context) ([]string, error) { return h.agent.client.Certificates(ctx, store) })
}

func (h *Host) AddCertificate(ctx context.Context, store string, der []byte) error {
	return h.call(ctx, "cert.add", 0, func(ctx context.Context) error { return h.agent.client.AddCertificate(ctx, store, der) })
}

func (h *Host) DeleteCertificate(ctx context.Context, store, thumbprint string) error {
	return h.call(ctx, "cert.delete", 0, func(ctx context.Context) error { return h.agent.client.DeleteCertificate(ctx, store, thumbprint) })
}

func (h *Host) FirewallRule(ctx context.Context, name string) (host.FirewallRule, error) {
	return do1(ctx, h, "fw.rule.get", 0, func(ctx context.Context) (host.FirewallRule, error) { return h.agent.client.FirewallRule(ctx, name) })
}

func (h *Host) SetFirewallRule(ctx context.Context, rule host.FirewallRule) error {
	return h.call(ctx, "fw.rule.set", 0, func(ctx context.Context) error { return h.agent.client.SetFirewallRule(ctx, rule) })
}

func (h *Host) DeleteFirewallRule(ctx context.Context, name string) error {
	return h.call(ctx, "fw.rule.delete", 0, func(ctx context.Context) error { return h.agent.client.DeleteFirewallRule(ctx, name) })
}

func (h *Host) FileACL(ctx context.Context, path string) (host.ACL, error) {
	return do1(ctx, h, "fs.acl.get", 0, func(ctx context.Context) (host.ACL, error) { return h.agent.client.FileACL(ctx, path) })
}

func (h *Host) SetFileACL(ctx context.Context, path string, acl host.ACL) error {
	return h.call(ctx, "fs.acl.set", 0, func(ctx context.Context) error { return h.agent.client.SetFileACL(ctx, path, acl) })
}

func (h *Host) HNSDeleteNetwork(ctx context.Context, id string) error {
	return h.call(ctx, "hns.network.delete", 0, func(ctx context.Context) error { return h.agent.client.HNSDeleteNetwork(ctx, id) })
}
