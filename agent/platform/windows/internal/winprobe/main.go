//go:build windows

// Command winprobe drives the Windows platform directly for the Wine tests
// (wine_test.go), until the agent's RPC can: it reads a JSON array of
// operations on stdin, runs them in order in one process against
// windows.New(), and prints one JSON result per operation.
//
//	[{"op":"svc-query","args":{"name":"x"}}, ...]  ->  [{"value":...,"error":"...","not_supported":true,"not_exist":true}, ...]
//
// `winprobe child` is a program for Run to start: it prints its arguments,
// stdin and $PROBE_ENV as JSON, "to stderr" on stderr, $PROBE_BIG bytes of
// padding, and exits with $PROBE_EXIT.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/wsu-project/wsu/agent/platform/windows"
	"github.com/wsu-project/wsu/host"
)

type op struct {
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

type result struct {
	Value        any    `json:"value,omitempty"`
	Error        string `json:"error,omitempty"`
	NotSupported bool   `json:"not_supported,omitempty"`
	NotExist     bool   `json:"not_exist,omitempty"`
}

// args are the fields any operation may use.
type args struct {
	Path      string               `json:"path"`
	Recursive bool                 `json:"recursive"`
	Content   []byte               `json:"content"`
	Mode      fs.FileMode          `json:"mode"`
	Limit     int64                `json:"limit"`
	CutAfter  int                  `json:"cut_after"`
	Cancel    bool                 `json:"cancel"`
	Argv      []string             `json:"argv"`
	Dir       string               `json:"dir"`
	Env       []string             `json:"env"`
	Stdin     []byte               `json:"stdin"`
	TimeoutMS int                  `json:"timeout_ms"`
	OutLimit  int                  `json:"output_limit"`
	PID       int                  `json:"pid"`
	Image     string               `json:"image"`
	Name      string               `json:"name"`
	Value     string               `json:"value"`
	State     host.ServiceState    `json:"state"`
	Service   host.ServiceConfig   `json:"service"`
	Recovery  host.ServiceRecovery `json:"recovery"`
	Key       string               `json:"key"`
	RegValue  host.RegistryValue   `json:"reg_value"`
	Endpoint  host.HNSEndpoint     `json:"endpoint"`
	ID        string               `json:"id"`
	ACL       host.ACL             `json:"acl"`
	Rule      host.FirewallRule    `json:"rule"`
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		child()
		return
	}
	var ops []op
	if err := json.NewDecoder(os.Stdin).Decode(&ops); err != nil {
		fmt.Fprintln(os.Stderr, "winprobe: read operations:", err)
		os.Exit(2)
	}
	// Reboot runs up to InitiateSystemShutdownEx, which is recorded, not
	// made (the "shutdown-calls" op returns what was asked).
	var calls []windows.ShutdownCall
	h := windows.NewWithOptions(windows.Options{Shutdown: func(c windows.ShutdownCall) error {
		calls = append(calls, c)
		return nil
	}})
	defer h.Close()
	out := make([]result, 0, len(ops))
	for _, o := range ops {
		var a args
		if len(o.Args) > 0 {
			if err := json.Unmarshal(o.Args, &a); err != nil {
				fmt.Fprintf(os.Stderr, "winprobe: %s: %v\n", o.Op, err)
				os.Exit(2)
			}
		}
		var v any
		var err error
		if o.Op == "shutdown-calls" {
			v = calls
		} else {
			v, err = do(h, o.Op, a)
		}
		r := result{Value: v}
		if err != nil {
			r.Error = err.Error()
			r.NotSupported = errors.Is(err, host.ErrNotSupported)
			r.NotExist = errors.Is(err, fs.ErrNotExist)
		}
		out = append(out, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, "winprobe:", err)
		os.Exit(2)
	}
}

func do(h host.Host, name string, a args) (any, error) {
	ctx := context.Background()
	timeout := time.Duration(a.TimeoutMS) * time.Millisecond
	switch name {
	case "time":
		return h.SystemTime(ctx)
	case "disk-free":
		return h.DiskFree(ctx, a.Path)
	case "mtime-step":
		return h.(host.ModTimeStepper).ModTimeStep(ctx, a.Path), nil
	case "facts":
		return h.Facts(ctx)
	case "stat":
		return h.Stat(ctx, a.Path)
	case "sha256":
		return h.SHA256(ctx, a.Path)
	case "read":
		return h.ReadFile(ctx, a.Path, a.Limit)
	case "write":
		return nil, h.WriteFile(ctx, a.Path, strings.NewReader(string(a.Content)), a.Mode)
	case "write-cut":
		// A stream that breaks (or a play cancelled) after cut_after bytes.
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		r := &cutReader{data: a.Content, cutAfter: a.CutAfter}
		if a.Cancel {
			r.onCut = cancel
		}
		return nil, h.WriteFile(ctx, a.Path, r, a.Mode)
	case "mkdir":
		return nil, h.MkdirAll(ctx, a.Path, 0o755)
	case "chmod":
		return nil, h.Chmod(ctx, a.Path, a.Mode)
	case "remove":
		return nil, h.Remove(ctx, a.Path, a.Recursive)
	case "readdir":
		return h.ReadDir(ctx, a.Path, int(a.Limit))
	case "run":
		return h.Run(ctx, host.RunRequest{Argv: a.Argv, Dir: a.Dir, Env: a.Env, Stdin: a.Stdin, Timeout: timeout, OutputLimit: a.OutLimit})
	case "spawn":
		// Started and left running, for the process tests.
		cmd := exec.Command(a.Argv[0], a.Argv[1:]...)
		// Own output files: under Wine a child given no handles for them
		// inherits our stdout, and the test would wait for its EOF.
		out, err := os.CreateTemp("", "winprobe-spawn-*.log")
		if err != nil {
			return nil, err
		}
		defer out.Close()
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		pid := cmd.Process.Pid
		cmd.Process.Release()
		return pid, nil
	case "ps":
		return h.ListProcesses(ctx)
	case "kill":
		return h.Kill(ctx, a.PID, a.Image)
	case "svc-query":
		return h.QueryService(ctx, a.Name)
	case "svc-create":
		return nil, h.CreateService(ctx, a.Service)
	case "svc-update":
		return nil, h.UpdateService(ctx, a.Service)
	case "svc-recovery":
		return nil, h.SetServiceRecovery(ctx, a.Name, a.Recovery)
	case "svc-start":
		return nil, h.StartService(ctx, a.Name)
	case "svc-stop":
		return nil, h.StopService(ctx, a.Name, timeout)
	case "svc-delete":
		return nil, h.DeleteService(ctx, a.Name, timeout)
	case "svc-wait":
		return nil, h.WaitService(ctx, a.Name, a.State, timeout)
	case "svc-dependents":
		return h.DependentServices(ctx, a.Name)
	case "reboot":
		return nil, h.(host.Rebooter).Reboot(ctx, host.RebootRequest{Delay: timeout, Message: a.Value})
	case "feature-get":
		return h.(host.OptionalFeatures).OptionalFeature(ctx, a.Name)
	case "feature-enable":
		return h.(host.OptionalFeatures).EnableOptionalFeature(ctx, a.Name)
	case "acl-get":
		return h.FileACL(ctx, a.Path)
	case "acl-set":
		return nil, h.SetFileACL(ctx, a.Path, a.ACL)
	case "acl-roundtrip":
		return windows.DescriptorRoundTrip(a.ACL)
	case "fw-get":
		return h.(host.Firewall).FirewallRule(ctx, a.Name)
	case "fw-set":
		return nil, h.(host.Firewall).SetFirewallRule(ctx, a.Rule)
	case "fw-roundtrip":
		return windows.FirewallRuleRoundTrip(ctx, a.Rule)
	case "fw-delete":
		return nil, h.(host.Firewall).DeleteFirewallRule(ctx, a.Name)
	case "reg-get":
		return h.RegistryGet(ctx, a.Key, a.Name)
	case "reg-set":
		return nil, h.RegistrySet(ctx, a.Key, a.Name, a.RegValue)
	case "reg-delete":
		return nil, h.RegistryDelete(ctx, a.Key, a.Name)
	case "env-get":
		v, ok, err := h.EnvGet(ctx, a.Name)
		return map[string]any{"value": v, "exists": ok}, err
	case "env-set":
		return nil, h.EnvSet(ctx, a.Name, a.Value)
	case "env-delete":
		return nil, h.EnvDelete(ctx, a.Name)
	case "path-add":
		return h.PathAdd(ctx, a.Path)
	case "path-remove":
		return h.PathRemove(ctx, a.Path)
	case "hns-networks":
		return h.HNSNetworks(ctx)
	case "hns-endpoints":
		return h.HNSEndpoints(ctx)
	case "hns-create-endpoint":
		return h.HNSCreateEndpoint(ctx, a.Endpoint)
	case "hns-delete-endpoint":
		return nil, h.HNSDeleteEndpoint(ctx, a.ID)
	case "hns-delete-network":
		return nil, h.HNSDeleteNetwork(ctx, a.ID)
	case "sleep":
		time.Sleep(timeout)
		return nil, nil
	}
	return nil, fmt.Errorf("unknown operation %q", name)
}

// cutReader yields cutAfter bytes of data and then fails, like a dropped
// connection; with onCut set it cancels the context instead.
type cutReader struct {
	data     []byte
	cutAfter int
	off      int
	onCut    func()
}

func (r *cutReader) Read(p []byte) (int, error) {
	if r.off >= r.cutAfter {
		if r.onCut != nil {
			r.onCut()
			// Keep delivering: the writer must notice the cancel by itself.
			if r.off >= len(r.data) {
				return 0, io.EOF
			}
			n := copy(p, r.data[r.off:])
			r.off += n
			return n, nil
		}
		return 0, errors.New("connection reset (test)")
	}
	n := copy(p, r.data[r.off:min(r.cutAfter, len(r.data))])
	r.off += n
	return n, nil
}

func child() {
	stdin, _ := io.ReadAll(os.Stdin)
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"args": os.Args[2:], "stdin": string(stdin), "env": os.Getenv("PROBE_ENV"),
	})
	if n, _ := strconv.Atoi(os.Getenv("PROBE_BIG")); n > 0 {
		os.Stdout.Write([]byte(strings.Repeat("x", n)))
	}
	fmt.Fprint(os.Stderr, "to stderr")
	code, _ := strconv.Atoi(os.Getenv("PROBE_EXIT"))
	os.Exit(code)
}
