package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
)

// The host.Host methods: one request each, except Facts.

// Facts returns the facts the agent sent in its hello: every backend caches
// them anyway, and asking again would cost every task that checks the host
// a round trip. Only an agent that could not gather them then is asked.
// A closed or lost connection is still an error, as for any other call.
func (c *Client) Facts(ctx context.Context) (host.Facts, error) {
	if err := ctx.Err(); err != nil {
		return host.Facts{}, err
	}
	if c.hello.Facts != nil {
		if err := c.connErr(); err != nil {
			return host.Facts{}, err
		}
		return *c.hello.Facts, nil
	}
	var f host.Facts
	_, err := c.roundTrip(ctx, proto.OpFacts, nil, nil, 0, &f)
	return f, err
}

func (c *Client) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	var fi host.FileInfo
	_, err := c.roundTrip(ctx, proto.OpStat, proto.PathArgs{Path: path}, nil, 0, &fi)
	return fi, err
}

func (c *Client) SHA256(ctx context.Context, path string) (string, error) {
	var res proto.SHA256Result
	_, err := c.roundTrip(ctx, proto.OpSHA256, proto.PathArgs{Path: path}, nil, 0, &res)
	return res.SHA256, err
}

// ReadFile receives the content as data frames; the result's size checks
// that none went missing.
func (c *Client) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	var res proto.ReadResult
	data, err := c.roundTrip(ctx, proto.OpRead, proto.ReadArgs{Path: path, Limit: limit}, nil, max(limit, 0), &res)
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != res.Size {
		return nil, fmt.Errorf("read %s: %w: got %d bytes of %d", path, proto.ErrProtocol, len(data), res.Size)
	}
	return data, nil
}

// WriteFile streams content in data frames; the agent writes them to a temp
// file as they arrive. If the stream is cut (content fails, ctx ends, the
// connection drops) the agent discards the temp file and path keeps its old
// content.
func (c *Client) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	_, err := c.roundTrip(ctx, proto.OpWrite, proto.PathModeArgs{Path: path, Mode: mode}, content, 0, nil)
	if err != nil && ctx.Err() == nil && !isRemote(err) {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return err
}

func (c *Client) MkdirAll(ctx context.Context, path string, mode fs.FileMode) error {
	_, err := c.roundTrip(ctx, proto.OpMkdir, proto.PathModeArgs{Path: path, Mode: mode}, nil, 0, nil)
	return err
}

func (c *Client) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	_, err := c.roundTrip(ctx, proto.OpChmod, proto.PathModeArgs{Path: path, Mode: mode}, nil, 0, nil)
	return err
}

func (c *Client) Remove(ctx context.Context, path string, recursive bool) error {
	_, err := c.roundTrip(ctx, proto.OpRemove, proto.RemoveArgs{Path: path, Recursive: recursive}, nil, 0, nil)
	return err
}

// ReadDir checks that the agent kept to the limit: it bounds what one
// answer may hold.
func (c *Client) ReadDir(ctx context.Context, path string, limit int) ([]host.DirEntry, error) {
	var ents []host.DirEntry
	_, err := c.roundTrip(ctx, proto.OpReadDir, proto.ReadDirArgs{Path: path, Limit: limit}, nil, 0, &ents)
	if err != nil {
		return nil, err
	}
	if n := host.DirLimit(limit); len(ents) > n {
		return nil, fmt.Errorf("readdir %s: %w: got %d entries, asked for at most %d", path, proto.ErrProtocol, len(ents), n)
	}
	return ents, nil
}

// Run sends stdin, if any, as the request's stream and receives stdout and
// then stderr as data frames.
func (c *Client) Run(ctx context.Context, req host.RunRequest) (host.RunResult, error) {
	args := proto.RunArgs{Argv: req.Argv, Dir: req.Dir, Env: req.Env, Timeout: req.Timeout, OutputLimit: req.OutputLimit}
	var stdin io.Reader
	if req.Stdin != nil {
		stdin = bytes.NewReader(req.Stdin)
	}
	limit := req.OutputLimit
	if limit <= 0 {
		limit = host.DefaultOutputLimit
	}
	var res proto.RunResult
	data, err := c.roundTrip(ctx, proto.OpRun, args, stdin, 2*int64(limit), &res)
	if err != nil {
		return host.RunResult{}, err
	}
	if res.StdoutLen < 0 || res.StderrLen < 0 || res.StdoutLen+res.StderrLen != len(data) {
		return host.RunResult{}, fmt.Errorf("run: %w: got %d bytes of output, expected %d+%d", proto.ErrProtocol, len(data), res.StdoutLen, res.StderrLen)
	}
	return host.RunResult{
		ExitCode:  res.ExitCode,
		Stdout:    part(data[:res.StdoutLen]),
		Stderr:    part(data[res.StdoutLen:]),
		Truncated: res.Truncated,
		TimedOut:  res.TimedOut,
	}, nil
}

// part keeps an empty output nil, as the local host reports it, and stops
// an append to stdout from overwriting stderr.
func part(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b[:len(b):len(b)]
}

func (c *Client) ListProcesses(ctx context.Context) ([]host.Process, error) {
	var ps []host.Process
	_, err := c.roundTrip(ctx, proto.OpList, nil, nil, 0, &ps)
	return ps, err
}

func (c *Client) Kill(ctx context.Context, pid int, image string) (int, error) {
	var res proto.CountResult
	_, err := c.roundTrip(ctx, proto.OpKill, proto.KillArgs{PID: pid, Image: image}, nil, 0, &res)
	return res.Count, err
}

// DialTCP asks the agent to open (and close) a TCP connection from the
// host. The agent bounds the dial by timeout; the round trip is bounded by
// ctx only.
func (c *Client) DialTCP(ctx context.Context, address string, timeout time.Duration) error {
	_, err := c.roundTrip(ctx, proto.OpDial, proto.DialArgs{Address: address, Timeout: timeout}, nil, 0, nil)
	return err
}

// DoHTTP asks the agent to make an HTTP request from the host; the agent
// bounds it by req.Timeout, the round trip is bounded by ctx only.
func (c *Client) DoHTTP(ctx context.Context, req host.HTTPRequest) (host.HTTPResponse, error) {
	var res host.HTTPResponse
	_, err := c.roundTrip(ctx, proto.OpHTTP, req, nil, 0, &res)
	return res, err
}

// SystemTime reads the host's clock. The answer is as old as the reply's
// trip back: callers comparing clocks measure the round trip themselves.
func (c *Client) SystemTime(ctx context.Context) (time.Time, error) {
	var res proto.TimeResult
	_, err := c.roundTrip(ctx, proto.OpSysTime, nil, nil, 0, &res)
	return res.Time, err
}

// DiskFree describes the volume holding path.
func (c *Client) DiskFree(ctx context.Context, path string) (host.DiskSpace, error) {
	var ds host.DiskSpace
	_, err := c.roundTrip(ctx, proto.OpDiskFree, proto.PathArgs{Path: path}, nil, 0, &ds)
	return ds, err
}

// NativePath returns the path as the host's OS names it
// (host.NativePather): the simulation's directory for C:\k\x, the path
// itself on Windows.
func (c *Client) NativePath(ctx context.Context, path string) (string, error) {
	var res proto.PathResult
	if _, err := c.roundTrip(ctx, proto.OpNativePath, proto.PathArgs{Path: path}, nil, 0, &res); err != nil {
		return "", err
	}
	return res.Path, nil
}

// Reboot asks the agent's host to restart (host.Rebooter). The agent may
// go down before its answer arrives: an error wrapping
// host.ErrConnectionLost then says nothing about whether it will.
func (c *Client) Reboot(ctx context.Context, req host.RebootRequest) error {
	_, err := c.roundTrip(ctx, proto.OpReboot, req, nil, 0, nil)
	return err
}

// OptionalFeature describes a Windows optional feature
// (host.OptionalFeatures).
func (c *Client) OptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	var fi host.FeatureInfo
	_, err := c.roundTrip(ctx, proto.OpFeatureGet, proto.NameArgs{Name: name}, nil, 0, &fi)
	return fi, err
}

// EnableOptionalFeature enables a Windows optional feature.
func (c *Client) EnableOptionalFeature(ctx context.Context, name string) (host.FeatureInfo, error) {
	var fi host.FeatureInfo
	_, err := c.roundTrip(ctx, proto.OpFeatureEnable, proto.NameArgs{Name: name}, nil, 0, &fi)
	return fi, err
}

// FirewallRule reads a firewall rule (host.Firewall); an agent whose
// backend has no firewall answers not_supported.
func (c *Client) FirewallRule(ctx context.Context, name string) (host.FirewallRule, error) {
	var r host.FirewallRule
	_, err := c.roundTrip(ctx, proto.OpFwGet, proto.NameArgs{Name: name}, nil, 0, &r)
	return r, err
}

// SetFirewallRule makes rule the only rule with its name.
func (c *Client) SetFirewallRule(ctx context.Context, rule host.FirewallRule) error {
	_, err := c.roundTrip(ctx, proto.OpFwSet, proto.FirewallRuleArgs{Rule: rule}, nil, 0, nil)
	return err
}

// DeleteFirewallRule removes every rule with the name.
func (c *Client) DeleteFirewallRule(ctx context.Context, name string) error {
	_, err := c.roundTrip(ctx, proto.OpFwDelete, proto.NameArgs{Name: name}, nil, 0, nil)
	return err
}

// FileACL reads a file's owner and DACL.
func (c *Client) FileACL(ctx context.Context, path string) (host.ACL, error) {
	var acl host.ACL
	_, err := c.roundTrip(ctx, proto.OpACLGet, proto.PathArgs{Path: path}, nil, 0, &acl)
	return acl, err
}

// SetFileACL sets a file's owner and explicit DACL entries.
func (c *Client) SetFileACL(ctx context.Context, path string, acl host.ACL) error {
	_, err := c.roundTrip(ctx, proto.OpACLSet, proto.ACLArgs{Path: path, ACL: acl}, nil, 0, nil)
	return err
}

func (c *Client) QueryService(ctx context.Context, name string) (host.ServiceInfo, error) {
	var si host.ServiceInfo
	_, err := c.roundTrip(ctx, proto.OpSvcQuery, proto.NameArgs{Name: name}, nil, 0, &si)
	return si, err
}

func (c *Client) CreateService(ctx context.Context, cfg host.ServiceConfig) error {
	_, err := c.roundTrip(ctx, proto.OpSvcCreate, proto.ServiceArgs{Config: cfg}, nil, 0, nil)
	return err
}

func (c *Client) UpdateService(ctx context.Context, cfg host.ServiceConfig) error {
	_, err := c.roundTrip(ctx, proto.OpSvcUpdate, proto.ServiceArgs{Config: cfg}, nil, 0, nil)
	return err
}

func (c *Client) SetServiceRecovery(ctx context.Context, name string, r host.ServiceRecovery) error {
	_, err := c.roundTrip(ctx, proto.OpSvcRecovery, proto.RecoveryArgs{Name: name, Recovery: r}, nil, 0, nil)
	return err
}

func (c *Client) StartService(ctx context.Context, name string) error {
	_, err := c.roundTrip(ctx, proto.OpSvcStart, proto.NameArgs{Name: name}, nil, 0, nil)
	return err
}

func (c *Client) StopService(ctx context.Context, name string, timeout time.Duration) error {
	_, err := c.roundTrip(ctx, proto.OpSvcStop, proto.NameTimeoutArgs{Name: name, Timeout: timeout}, nil, 0, nil)
	return err
}

func (c *Client) DeleteService(ctx context.Context, name string, timeout time.Duration) error {
	_, err := c.roundTrip(ctx, proto.OpSvcDelete, proto.NameTimeoutArgs{Name: name, Timeout: timeout}, nil, 0, nil)
	return err
}

func (c *Client) WaitService(ctx context.Context, name string, state host.ServiceState, timeout time.Duration) error {
	_, err := c.roundTrip(ctx, proto.OpSvcWait, proto.WaitArgs{Name: name, State: state, Timeout: timeout}, nil, 0, nil)
	return err
}

func (c *Client) DependentServices(ctx context.Context, name string) ([]host.ServiceStatus, error) {
	var deps []host.ServiceStatus
	_, err := c.roundTrip(ctx, proto.OpSvcDependents, proto.NameArgs{Name: name}, nil, 0, &deps)
	return deps, err
}

func (c *Client) RegistryGet(ctx context.Context, key, name string) (host.RegistryValue, error) {
	var v host.RegistryValue
	_, err := c.roundTrip(ctx, proto.OpRegGet, proto.RegArgs{Key: key, Name: name}, nil, 0, &v)
	return v, err
}

func (c *Client) RegistrySet(ctx context.Context, key, name string, v host.RegistryValue) error {
	_, err := c.roundTrip(ctx, proto.OpRegSet, proto.RegSetArgs{Key: key, Name: name, Value: v}, nil, 0, nil)
	return err
}

func (c *Client) RegistryDelete(ctx context.Context, key, name string) error {
	_, err := c.roundTrip(ctx, proto.OpRegDelete, proto.RegArgs{Key: key, Name: name}, nil, 0, nil)
	return err
}

func (c *Client) EnvGet(ctx context.Context, name string) (string, bool, error) {
	var res proto.EnvResult
	_, err := c.roundTrip(ctx, proto.OpEnvGet, proto.NameArgs{Name: name}, nil, 0, &res)
	return res.Value, res.Exists, err
}

func (c *Client) EnvSet(ctx context.Context, name, value string) error {
	_, err := c.roundTrip(ctx, proto.OpEnvSet, proto.EnvSetArgs{Name: name, Value: value}, nil, 0, nil)
	return err
}

func (c *Client) EnvDelete(ctx context.Context, name string) error {
	_, err := c.roundTrip(ctx, proto.OpEnvDelete, proto.NameArgs{Name: name}, nil, 0, nil)
	return err
}

func (c *Client) PathAdd(ctx context.Context, dir string) (bool, error) {
	var res proto.ChangedResult
	_, err := c.roundTrip(ctx, proto.OpPathAdd, proto.DirArgs{Dir: dir}, nil, 0, &res)
	return res.Changed, err
}

func (c *Client) PathRemove(ctx context.Context, dir string) (bool, error) {
	var res proto.ChangedResult
	_, err := c.roundTrip(ctx, proto.OpPathRm, proto.DirArgs{Dir: dir}, nil, 0, &res)
	return res.Changed, err
}

func (c *Client) HNSNetworks(ctx context.Context) ([]host.HNSNetwork, error) {
	var ns []host.HNSNetwork
	_, err := c.roundTrip(ctx, proto.OpHNSNetworks, nil, nil, 0, &ns)
	return ns, err
}

func (c *Client) HNSEndpoints(ctx context.Context) ([]host.HNSEndpoint, error) {
	var es []host.HNSEndpoint
	_, err := c.roundTrip(ctx, proto.OpHNSEndpoints, nil, nil, 0, &es)
	return es, err
}

func (c *Client) HNSCreateEndpoint(ctx context.Context, spec host.HNSEndpoint) (host.HNSEndpoint, error) {
	var ep host.HNSEndpoint
	_, err := c.roundTrip(ctx, proto.OpHNSCreateEndpoint, proto.EndpointArgs{Spec: spec}, nil, 0, &ep)
	return ep, err
}

func (c *Client) HNSDeleteEndpoint(ctx context.Context, id string) error {
	_, err := c.roundTrip(ctx, proto.OpHNSDeleteEndpoint, proto.IDArgs{ID: id}, nil, 0, nil)
	return err
}

func (c *Client) HNSDeleteNetwork(ctx context.Context, id string) error {
	_, err := c.roundTrip(ctx, proto.OpHNSDeleteNetwork, proto.IDArgs{ID: id}, nil, 0, nil)
	return err
}

var _ host.CertStore = (*Client)(nil)

// Certificates lists a LocalMachine store's thumbprints.
func (c *Client) Certificates(ctx context.Context, store string) ([]string, error) {
	var tps []string
	_, err := c.roundTrip(ctx, proto.OpCertList, proto.StoreArgs{Store: store}, nil, 0, &tps)
	return tps, err
}

// AddCertificate adds a DER certificate to a LocalMachine store.
func (c *Client) AddCertificate(ctx context.Context, store string, der []byte) error {
	_, err := c.roundTrip(ctx, proto.OpCertAdd, proto.CertAddArgs{Store: store, DER: der}, nil, 0, nil)
	return err
}

// DeleteCertificate removes a certificate from a LocalMachine store.
func (c *Client) DeleteCertificate(ctx context.Context, store, thumbprint string) error {
	_, err := c.roundTrip(ctx, proto.OpCertDelete, proto.CertArgs{Store: store, Thumbprint: thumbprint}, nil, 0, nil)
	return err
}
