package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/wsu-project/wsu/agent/proto"
	"github.com/wsu-project/wsu/host"
)

// request is what a handler gets.
type request struct {
	ctx  context.Context
	h    host.Host
	args json.RawMessage
	// in is the request's inbound stream, nil without one.
	in io.Reader
	// send writes one outbound data frame.
	send func([]byte) error
}

// handler runs one op; a nil result is sent as no result.
type handler func(r *request) (any, error)

// handlers maps each op to its Host method.
var handlers = map[string]handler{
	proto.OpFacts: func(r *request) (any, error) { return r.h.Facts(r.ctx) },

	proto.OpStat: with(func(r *request, a proto.PathArgs) (any, error) { return r.h.Stat(r.ctx, a.Path) }),
	proto.OpSHA256: with(func(r *request, a proto.PathArgs) (any, error) {
		sum, err := r.h.SHA256(r.ctx, a.Path)
		return proto.SHA256Result{SHA256: sum}, err
	}),
	proto.OpRead: with(func(r *request, a proto.ReadArgs) (any, error) {
		data, err := r.h.ReadFile(r.ctx, a.Path, a.Limit)
		if err != nil {
			return nil, err
		}
		if err := r.sendAll(data); err != nil {
			return nil, err
		}
		return proto.ReadResult{Size: int64(len(data))}, nil
	}),
	proto.OpWrite: with(func(r *request, a proto.PathModeArgs) (any, error) {
		if r.in == nil {
			return nil, fmt.Errorf("%w: fs.write needs a stream", proto.ErrInvalid)
		}
		return nil, r.h.WriteFile(r.ctx, a.Path, r.in, a.Mode)
	}),
	proto.OpMkdir: with(func(r *request, a proto.PathModeArgs) (any, error) {
		return nil, r.h.MkdirAll(r.ctx, a.Path, a.Mode)
	}),
	proto.OpChmod: with(func(r *request, a proto.PathModeArgs) (any, error) {
		return nil, r.h.Chmod(r.ctx, a.Path, a.Mode)
	}),
	proto.OpRemove: with(func(r *request, a proto.RemoveArgs) (any, error) {
		return nil, r.h.Remove(r.ctx, a.Path, a.Recursive)
	}),
	proto.OpReadDir: with(func(r *request, a proto.ReadDirArgs) (any, error) {
		ents, err := r.h.ReadDir(r.ctx, a.Path, a.Limit)
		if err != nil {
			return nil, err
		}
		if ents == nil {
			ents = []host.DirEntry{} // an empty directory is [], not null
		}
		return ents, nil
	}),
	proto.OpNativePath: with(func(r *request, a proto.PathArgs) (any, error) {
		if np, ok := r.h.(host.NativePather); ok {
			p, err := np.NativePath(r.ctx, a.Path)
			return proto.PathResult{Path: p}, err
		}
		return proto.PathResult(a), nil // no native form: the path as given
	}),
	proto.OpFwGet: with(func(r *request, a proto.NameArgs) (any, error) {
		fw, err := firewall(r.h)
		if err != nil {
			return nil, err
		}
		return fw.FirewallRule(r.ctx, a.Name)
	}),
	proto.OpFwSet: with(func(r *request, a proto.FirewallRuleArgs) (any, error) {
		fw, err := firewall(r.h)
		if err != nil {
			return nil, err
		}
		return nil, fw.SetFirewallRule(r.ctx, a.Rule)
	}),
	proto.OpFwDelete: with(func(r *request, a proto.NameArgs) (any, error) {
		fw, err := firewall(r.h)
		if err != nil {
			return nil, err
		}
		return nil, fw.DeleteFirewallRule(r.ctx, a.Name)
	}),
	proto.OpACLGet: with(func(r *request, a proto.PathArgs) (any, error) { return r.h.FileACL(r.ctx, a.Path) }),
	proto.OpACLSet: with(func(r *request, a proto.ACLArgs) (any, error) {
		return nil, r.h.SetFileACL(r.ctx, a.Path, a.ACL)
	}),

	proto.OpRun:  with(run),
	proto.OpList: func(r *request) (any, error) { return r.h.ListProcesses(r.ctx) },
	proto.OpKill: with(func(r *request, a proto.KillArgs) (any, error) {
		n, err := r.h.Kill(r.ctx, a.PID, a.Image)
		return proto.CountResult{Count: n}, err
	}),
	proto.OpDial: with(func(r *request, a proto.DialArgs) (any, error) {
		return nil, r.h.DialTCP(r.ctx, a.Address, a.Timeout)
	}),
	proto.OpHTTP: with(func(r *request, a host.HTTPRequest) (any, error) {
		a, err := a.Normalize()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", proto.ErrInvalid, err)
		}
		return r.h.DoHTTP(r.ctx, a)
	}),
	proto.OpSysTime: func(r *request) (any, error) {
		t, err := r.h.SystemTime(r.ctx)
		return proto.TimeResult{Time: t}, err
	},
	proto.OpDiskFree: with(func(r *request, a proto.PathArgs) (any, error) { return r.h.DiskFree(r.ctx, a.Path) }),

	proto.OpSvcQuery: with(func(r *request, a proto.NameArgs) (any, error) { return r.h.QueryService(r.ctx, a.Name) }),
	proto.OpSvcCreate: with(func(r *request, a proto.ServiceArgs) (any, error) {
		return nil, r.h.CreateService(r.ctx, a.Config)
	}),
	proto.OpSvcUpdate: with(func(r *request, a proto.ServiceArgs) (any, error) {
		return nil, r.h.UpdateService(r.ctx, a.Config)
	}),
	proto.OpSvcRecovery: with(func(r *request, a proto.RecoveryArgs) (any, error) {
		return nil, r.h.SetServiceRecovery(r.ctx, a.Name, a.Recovery)
	}),
	proto.OpSvcStart: with(func(r *request, a proto.NameArgs) (any, error) { return nil, r.h.StartService(r.ctx, a.Name) }),
	proto.OpSvcStop: with(func(r *request, a proto.NameTimeoutArgs) (any, error) {
		return nil, r.h.StopService(r.ctx, a.Name, a.Timeout)
	}),
	proto.OpSvcDelete: with(func(r *request, a proto.NameTimeoutArgs) (any, error) {
		return nil, r.h.DeleteService(r.ctx, a.Name, a.Timeout)
	}),
	proto.OpSvcWait: with(func(r *request, a proto.WaitArgs) (any, error) {
		return nil, r.h.WaitService(r.ctx, a.Name, a.State, a.Timeout)
	}),
	proto.OpSvcDependents: with(func(r *request, a proto.NameArgs) (any, error) {
		deps, err := r.h.DependentServices(r.ctx, a.Name)
		if err == nil && deps == nil {
			deps = []host.ServiceStatus{} // none is [], not null
		}
		return deps, err
	}),

	proto.OpRegGet: with(func(r *request, a proto.RegArgs) (any, error) { return r.h.RegistryGet(r.ctx, a.Key, a.Name) }),
	proto.OpRegSet: with(func(r *request, a proto.RegSetArgs) (any, error) {
		return nil, r.h.RegistrySet(r.ctx, a.Key, a.Name, a.Value)
	}),
	proto.OpRegDelete: with(func(r *request, a proto.RegArgs) (any, error) {
		return nil, r.h.RegistryDelete(r.ctx, a.Key, a.Name)
	}),

	proto.OpEnvGet: with(func(r *request, a proto.NameArgs) (any, error) {
		v, ok, err := r.h.EnvGet(r.ctx, a.Name)
		return proto.EnvResult{Value: v, Exists: ok}, err
	}),
	proto.OpEnvSet:    with(func(r *request, a proto.EnvSetArgs) (any, error) { return nil, r.h.EnvSet(r.ctx, a.Name, a.Value) }),
	proto.OpEnvDelete: with(func(r *request, a proto.NameArgs) (any, error) { return nil, r.h.EnvDelete(r.ctx, a.Name) }),
	proto.OpPathAdd: with(func(r *request, a proto.DirArgs) (any, error) {
		changed, err := r.h.PathAdd(r.ctx, a.Dir)
		return proto.ChangedResult{Changed: changed}, err
	}),
	proto.OpPathRm: with(func(r *request, a proto.DirArgs) (any, error) {
		changed, err := r.h.PathRemove(r.ctx, a.Dir)
		return proto.ChangedResult{Changed: changed}, err
	}),

	proto.OpReboot: with(func(r *request, a host.RebootRequest) (any, error) {
		rb, err := host.AsRebooter(r.h)
		if err != nil {
			return nil, err
		}
		return nil, rb.Reboot(r.ctx, a)
	}),
	proto.OpFeatureGet: with(func(r *request, a proto.NameArgs) (any, error) {
		f, err := host.AsOptionalFeatures(r.h)
		if err != nil {
			return nil, err
		}
		return f.OptionalFeature(r.ctx, a.Name)
	}),
	proto.OpFeatureEnable: with(func(r *request, a proto.NameArgs) (any, error) {
		f, err := host.AsOptionalFeatures(r.h)
		if err != nil {
			return nil, err
		}
		return f.EnableOptionalFeature(r.ctx, a.Name)
	}),

	proto.OpHNSNetworks:  func(r *request) (any, error) { return r.h.HNSNetworks(r.ctx) },
	proto.OpHNSEndpoints: func(r *request) (any, error) { return r.h.HNSEndpoints(r.ctx) },
	proto.OpHNSCreateEndpoint: with(func(r *request, a proto.EndpointArgs) (any, error) {
		return r.h.HNSCreateEndpoint(r.ctx, a.Spec)
	}),
	proto.OpHNSDeleteEndpoint: with(func(r *request, a proto.IDArgs) (any, error) {
		return nil, r.h.HNSDeleteEndpoint(r.ctx, a.ID)
	}),
	proto.OpHNSDeleteNetwork: with(func(r *request, a proto.IDArgs) (any, error) {
		return nil, r.h.HNSDeleteNetwork(r.ctx, a.ID)
	}),

	proto.OpCertList: with(func(r *request, a proto.StoreArgs) (any, error) {
		cs, err := certStore(r.h, a.Store)
		if err != nil {
			return nil, err
		}
		tps, err := cs.Certificates(r.ctx, a.Store)
		if err == nil && tps == nil {
			tps = []string{} // an empty store is [], not null
		}
		return tps, err
	}),
	proto.OpCertAdd: with(func(r *request, a proto.CertAddArgs) (any, error) {
		cs, err := certStore(r.h, a.Store)
		if err != nil {
			return nil, err
		}
		if len(a.DER) == 0 {
			return nil, fmt.Errorf("%w: cert.add without a certificate", proto.ErrInvalid)
		}
		return nil, cs.AddCertificate(r.ctx, a.Store, a.DER)
	}),
	proto.OpCertDelete: with(func(r *request, a proto.CertArgs) (any, error) {
		if err := host.CheckThumbprint(a.Thumbprint); err != nil {
			return nil, fmt.Errorf("%w: %v", proto.ErrInvalid, err)
		}
		cs, err := certStore(r.h, a.Store)
		if err != nil {
			return nil, err
		}
		return nil, cs.DeleteCertificate(r.ctx, a.Store, a.Thumbprint)
	}),
}

// certStore is the backend's certificate stores, after checking the store
// name; a backend without them is not supported.
func certStore(h host.Host, store string) (host.CertStore, error) {
	if err := host.CheckStoreName(store); err != nil {
		return nil, fmt.Errorf("%w: %v", proto.ErrInvalid, err)
	}
	cs, ok := h.(host.CertStore)
	if !ok {
		facts, _ := h.Facts(context.Background())
		return nil, host.NotSupported("certificate store", facts.OS)
	}
	return cs, nil
}

// with decodes an op's arguments strictly: within one protocol version
// both sides know every field, so an unknown one is a bug worth reporting.
func with[A any](f func(*request, A) (any, error)) handler {
	return func(r *request) (any, error) {
		var a A
		if len(r.args) > 0 {
			dec := json.NewDecoder(bytes.NewReader(r.args))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&a); err != nil {
				return nil, fmt.Errorf("%w: arguments: %v", proto.ErrInvalid, err)
			}
		}
		return f(r, a)
	}
}

func run(r *request, a proto.RunArgs) (any, error) {
	req := host.RunRequest{Argv: a.Argv, Dir: a.Dir, Env: a.Env, Timeout: a.Timeout, OutputLimit: a.OutputLimit}
	if r.in != nil {
		// The Host API takes stdin whole; bound it.
		stdin, err := io.ReadAll(io.LimitReader(r.in, maxStdin+1))
		if err != nil {
			return nil, fmt.Errorf("run: reading stdin: %w", err)
		}
		if len(stdin) > maxStdin {
			return nil, fmt.Errorf("%w: stdin is larger than %d bytes", proto.ErrInvalid, maxStdin)
		}
		req.Stdin = stdin
	}
	res, err := r.h.Run(r.ctx, req)
	if err != nil {
		return nil, err
	}
	if err := r.sendAll(res.Stdout); err != nil {
		return nil, err
	}
	if err := r.sendAll(res.Stderr); err != nil {
		return nil, err
	}
	return proto.RunResult{
		ExitCode:  res.ExitCode,
		StdoutLen: len(res.Stdout),
		StderrLen: len(res.Stderr),
		Truncated: res.Truncated,
		TimedOut:  res.TimedOut,
	}, nil
}

// sendAll sends data as data frames, stopping if the request is cancelled.
func (r *request) sendAll(data []byte) error {
	for len(data) > 0 {
		if err := r.ctx.Err(); err != nil {
			return err
		}
		n := min(len(data), chunkSize)
		if err := r.send(data[:n]); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// firewall is the backend's host.Firewall, or not_supported.
func firewall(h host.Host) (host.Firewall, error) {
	if fw, ok := h.(host.Firewall); ok {
		return fw, nil
	}
	return nil, host.NotSupported("firewall rules", host.PlatformOf(h))
}
