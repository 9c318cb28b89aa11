package winrm

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/inventory"
	wsmantest "github.com/wsu-project/wsu/test/wsman"
)

// The Linux wsu binary, built once per package run: the tests upload it as
// the "agent binary" and the endpoint runs it as a simulated Windows agent.
var (
	buildOnce sync.Once
	buildDir  string
	wsuPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// agentBinary builds the node agent (cmd/wsu-agent) for Linux once per
// test run: the simulated host runs it.
func agentBinary(tb testing.TB) string {
	tb.Helper()
	if runtime.GOOS != "linux" {
		tb.Skip("the simulated Windows host runs on Linux only")
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "wsu-winrm-test-")
		if buildErr != nil {
			return
		}
		wsuPath = filepath.Join(buildDir, "wsu-agent")
		out, err := exec.Command("go", "build", "-o", wsuPath, "github.com/wsu-project/wsu/cmd/wsu-agent").CombinedOutput()
		if err != nil {
			buildErr = &buildError{err, string(out)}
		}
	})
	if buildErr != nil {
		tb.Fatalf("building wsu-agent: %v", buildErr)
	}
	return wsuPath
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// fixture is an endpoint serving a simulated Windows host.
type fixture struct {
	srv    *wsmantest.Server
	sim    *wsmantest.SimAgent
	root   string // the simulated host's root
	caFile string
}

func newFixture(tb testing.TB, opts wsmantest.Options) *fixture {
	tb.Helper()
	root := tb.TempDir()
	sa, err := wsmantest.NewSimAgent(root, bootstrapCommand)
	if err != nil {
		tb.Fatal(err)
	}
	if opts.Handler == nil {
		opts.Handler = sa.Handle
	}
	srv, err := wsmantest.Start(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(srv.Close)
	f := &fixture{srv: srv, sim: sa, root: root}
	if srv.CA != nil {
		f.caFile = filepath.Join(tb.TempDir(), "ca.pem")
		if err := os.WriteFile(f.caFile, srv.CA.PEM, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

// vars are the inventory variables of a host behind the fixture.
func (f *fixture) vars(tb testing.TB, extra map[string]string) map[string]inventory.Var {
	m := map[string]string{
		"ansible_host":     f.srv.Host,
		"ansible_port":     strconv.Itoa(f.srv.Port),
		"ansible_user":     f.srv.User,
		"ansible_password": f.srv.Password,
		"wsu_agent_binary": agentBinary(tb),
	}
	if f.caFile != "" {
		m["winrm_ca_file"] = f.caFile
	} else {
		m["ansible_winrm_scheme"] = "http"
		m["ansible_winrm_message_encryption"] = "never"
	}
	for k, v := range extra {
		if v == "" {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return strVars(m)
}

func strVars(m map[string]string) map[string]inventory.Var {
	out := map[string]inventory.Var{}
	for k, v := range m {
		out[k] = inventory.Var{Value: cty.StringVal(v)}
	}
	return out
}

// dial connects and registers the host's Close.
func (f *fixture) dial(tb testing.TB, extra map[string]string) *Host {
	tb.Helper()
	h, err := f.tryDial(tb, extra)
	if err != nil {
		tb.Fatalf("Dial: %v", err)
	}
	tb.Cleanup(func() { h.Close() })
	return h
}

func (f *fixture) tryDial(tb testing.TB, extra map[string]string) (*Host, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hh, err := Dial(ctx, "win01", f.vars(tb, extra))
	if err != nil {
		return nil, err
	}
	return hh.(*Host), nil
}

// session opens a bare shell on the fixture, for tests below the agent.
func (f *fixture) session(tb testing.TB, extra map[string]string) *session {
	tb.Helper()
	cfg, err := ConfigFromVars("win01", f.vars(tb, extra))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := newSession(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if err := s.createShell(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.deleteShell() })
	return s
}

func (f *fixture) local(tb testing.TB, winPath string) string {
	tb.Helper()
	p, err := f.sim.LocalPath(winPath)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}
