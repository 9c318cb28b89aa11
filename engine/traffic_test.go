package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent"
	"github.com/wsu-project/wsu/agent/client"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/playbook"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/hashcache"
	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules/all"
	"github.com/wsu-project/wsu/transport/local"
)

// agentEnv makes this test binary a node agent; see TestAgentProcess.
const agentEnv = "WSU_ENGINE_TEST_AGENT_CACHE"

// TestAgentProcess is not a test: started by agentConnector with agentEnv
// set, this test binary is `wsu agent --platform native` (this machine's
// POSIX host behind the sha256 cache), serving on its stdin and stdout.
func TestAgentProcess(t *testing.T) {
	cache := os.Getenv(agentEnv)
	if cache == "" {
		return
	}
	backend := hashcache.Wrap(local.NewPOSIX(), cache)
	err := agent.Serve(context.Background(), os.Stdin, os.Stdout, backend, agent.ServerInfo{Version: "test", SHA256: "test", Platform: "native"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// childAgent is an agent process and the client driving it.
type childAgent struct {
	*client.Client
	cmd *exec.Cmd
}

// Close ends the agent (its stdin closes) and reaps it.
func (c *childAgent) Close() error {
	err := c.Client.Close()
	if werr := c.cmd.Wait(); err == nil {
		err = werr
	}
	return err
}

// agentConnector connects every host to a new agent child process: the
// real protocol over real pipes, as the SSH and WinRM transports drive it.
func agentConnector(t testing.TB) engine.Connector {
	cache := filepath.Join(t.TempDir(), "hash-cache.json")
	return engine.ConnectorFunc(func(ctx context.Context, _ engine.Target) (host.Host, error) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAgentProcess$")
		cmd.Env = append(os.Environ(), agentEnv+"="+cache)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		c, err := client.Dial(dctx, stdout, stdin)
		if err != nil {
			stdin.Close()
			cmd.Wait()
			return nil, err
		}
		return &childAgent{Client: c, cmd: cmd}, nil
	})
}

const rerunPlaybook = rootVar + `
variable "blob" {
  type = string
}

play "node" {
  hosts = "all"
  task "dirs" {
    for_each = toset(["etc", "logs"])
    directory { path = "${var.root}/${each.key}" }
  }
  task "kubelet_conf" {
    file {
      path    = "${var.root}/etc/kubelet.conf"
      content = "clusterDNS: 10.96.0.10\n"
    }
  }
  task "blob" {
    file {
      path    = "${var.root}/etc/blob"
      content = var.blob
      mode    = "0600"
    }
  }
  task "marker" {
    command {
      argv    = ["touch", "${var.root}/logs/installed"]
      creates = "${var.root}/logs/installed"
    }
  }
  task "report" {
    print { msg = "done" }
  }
}`

// TestRerunTraffic runs a playbook twice through a real agent process: the
// first run sends exactly the files' content, the second, which changes
// nothing, costs at most one round trip per task and sends nothing.
func TestRerunTraffic(t *testing.T) {
	f := newFixture(t, map[string]string{"play.hcl": rerunPlaybook})
	blob := strings.Repeat("0123456789abcdef", 40<<10) // 640 KiB: several data frames
	conf := "clusterDNS: 10.96.0.10\n"
	loader := playbook.NewLoader(all.Schemas(), nil)
	pb, diags := loader.Load(filepath.Join(f.dir, "play.hcl"))
	require.False(t, diags.HasErrors(), "%v", diags)
	inv, _ := inventory.ParseINI("inv", []byte("win01\n"))
	connector := agentConnector(t)
	run := func(mode engine.Mode) (*engine.Result, *recorder) {
		rec := &recorder{}
		res := engine.Run(context.Background(), engine.Request{
			Playbook: pb, Inventory: inv, Mode: mode, Registry: all.Schemas(), Hooks: rec, Connector: connector,
			Inputs: engine.Inputs{Vars: []string{"root=" + f.root, "blob=" + blob}},
		})
		require.False(t, res.Failed(), "%v %v", res.Diagnostics, rec.results(""))
		return res, rec
	}

	res, rec := run(engine.ModeApply)
	wantBytes := map[string]int64{"dirs": 0, "kubelet_conf": int64(len(conf)), "blob": int64(len(blob)), "marker": 0}
	var rpcs, sent int64
	for _, e := range rec.results("win01") {
		if e.Module == "print" {
			assert.Nil(t, e.Traffic, "%s acts on no host", e.Task)
			continue
		}
		require.NotNil(t, e.Traffic, e.Address)
		t.Logf("first run: %s: %d RPCs %v, %d bytes sent", e.Address, e.RPCs, e.RPCsByOp, e.BytesSent)
		assert.Equal(t, engine.StatusChanged, e.Status, e.Address)
		assert.Equal(t, wantBytes[e.Task], e.BytesSent, "%s sends its content", e.Address)
		assert.Positive(t, e.RPCs, e.Address)
		rpcs += e.RPCs
		sent += e.BytesSent
	}
	assert.Equal(t, int64(len(conf)+len(blob)), sent)
	require.Len(t, res.Recap, 1)
	require.NotNil(t, res.Recap[0].Traffic)
	assert.Equal(t, engine.Traffic{RPCs: rpcs, RPCsByOp: res.Recap[0].RPCsByOp, BytesSent: sent}, *res.Recap[0].Traffic,
		"the host's total is its tasks': facts come with the hello, and nothing was deployed")

	for _, mode := range []engine.Mode{engine.ModeApply, engine.ModePlan} {
		t.Run("again, "+string(mode), func(t *testing.T) {
			res, rec := run(mode)
			assert.Zero(t, res.Changes)
			tasks := 0
			for _, e := range rec.results("win01") {
				if e.Module == "print" {
					continue
				}
				tasks++
				require.NotNil(t, e.Traffic, e.Address)
				assert.Equal(t, engine.StatusOK, e.Status, e.Address)
				assert.Zero(t, e.BytesSent, e.Address)
				// The blob's managed mode needs a stat besides its sum.
				limit := int64(1)
				if e.Task == "blob" {
					limit = 2
				}
				assert.LessOrEqual(t, e.RPCs, limit, "%s: %v", e.Address, e.RPCsByOp)
			}
			assert.Equal(t, 5, tasks)
			assert.Equal(t, &engine.Traffic{RPCs: 6, RPCsByOp: map[string]int64{"fs.stat": 4, "fs.sha256": 2}}, res.Recap[0].Traffic)

			// The JSON stream carries the counts, zeros included.
			b, err := json.Marshal(rec.result(t, "win01", "kubelet_conf"))
			require.NoError(t, err)
			assert.Contains(t, string(b), `"rpcs":1,"rpcs_by_op":{"fs.sha256":1},"bytes_sent":0`)
			b, err = json.Marshal(rec.result(t, "win01", "report"))
			require.NoError(t, err)
			assert.NotContains(t, string(b), "rpcs")
		})
	}
}

// meteredHost is a FAKE transport: the local host, metered like the agent
// client (one RPC per call, fs.write content as bytes sent), whose
// connection "drops" on a WriteFile while *drop is set, and which counts
// agentBytes as deployed when dialled. It isolates the engine's
// accounting from any real protocol.
type meteredHost struct {
	host.Host
	meter host.Meter
	drop  *bool
	lost  bool
}

func (m *meteredHost) Counters() host.Counters { return m.meter.Counters() }
func (m *meteredHost) Lost() bool              { return m.lost }

func (m *meteredHost) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	m.meter.RPC("fs.stat")
	return m.Host.Stat(ctx, path)
}

func (m *meteredHost) SHA256(ctx context.Context, path string) (string, error) {
	m.meter.RPC("fs.sha256")
	return m.Host.SHA256(ctx, path)
}

func (m *meteredHost) MkdirAll(ctx context.Context, path string, mode fs.FileMode) error {
	m.meter.RPC("fs.mkdir")
	return m.Host.MkdirAll(ctx, path, mode)
}

func (m *meteredHost) WriteFile(ctx context.Context, path string, r io.Reader, mode fs.FileMode) error {
	m.meter.RPC("fs.write")
	if *m.drop {
		*m.drop, m.lost = false, true
		return fmt.Errorf("writing %s: %w", path, host.ErrConnectionLost)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m.meter.Sent(int64(len(b)))
	return m.Host.WriteFile(ctx, path, strings.NewReader(string(b)), mode)
}

// TestTrafficAccounting: tasks report what they cost, hosts their total;
// a reconnect keeps counting; an unmetered transport reports nothing.
func TestTrafficAccounting(t *testing.T) {
	const agentBytes = 1000
	content := "overlay config\n"
	// Planning sees no file (1 sum); applying stats, creates the parent
	// and writes.
	attempt := map[string]int64{"fs.sha256": 1, "fs.stat": 1, "fs.mkdir": 1, "fs.write": 1}
	twice := map[string]int64{"fs.sha256": 2, "fs.stat": 2, "fs.mkdir": 2, "fs.write": 2}
	tests := []struct {
		name      string
		metered   bool
		drop      bool
		wantTask  *engine.Traffic
		wantRecap *engine.Traffic
	}{
		{name: "not metered"},
		{
			name: "metered", metered: true,
			wantTask:  &engine.Traffic{RPCs: 4, RPCsByOp: attempt, BytesSent: int64(len(content))},
			wantRecap: &engine.Traffic{RPCs: 4, RPCsByOp: attempt, BytesSent: int64(len(content)), AgentBytes: agentBytes},
		},
		{
			// The lost attempt counts, and so does the second connection
			// (its deployment included): nothing restarts from zero.
			name: "reconnect", metered: true, drop: true,
			wantTask:  &engine.Traffic{RPCs: 8, RPCsByOp: twice, BytesSent: int64(len(content)), AgentBytes: agentBytes},
			wantRecap: &engine.Traffic{RPCs: 8, RPCsByOp: twice, BytesSent: int64(len(content)), AgentBytes: 2 * agentBytes},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"play.hcl": rootVar + `
play "p" {
  hosts = "all"
  task "cni" {
    file {
      path    = "${var.root}/cni/cni.conf"
      content = "` + strings.TrimSuffix(content, "\n") + `\n"
    }
  }
  task "after" {
    print { msg = "after" }
  }
}`})
			loader := playbook.NewLoader(all.Schemas(), nil)
			pb, diags := loader.Load(filepath.Join(f.dir, "play.hcl"))
			require.False(t, diags.HasErrors(), "%v", diags)
			inv, _ := inventory.ParseINI("inv", []byte("win01 reconnect_timeout=10s\n"))
			drop := tt.drop
			rec := &recorder{}
			res := engine.Run(context.Background(), engine.Request{
				Playbook: pb, Inventory: inv, Mode: engine.ModeApply, Registry: all.Schemas(), Hooks: rec,
				Inputs: engine.Inputs{Vars: []string{"root=" + f.root}},
				Connector: engine.ConnectorFunc(func(context.Context, engine.Target) (host.Host, error) {
					if !tt.metered {
						return local.NewPOSIX(), nil
					}
					m := &meteredHost{Host: local.NewPOSIX(), drop: &drop}
					m.meter.AgentSent(agentBytes)
					return m, nil
				}),
			})
			require.False(t, res.Failed(), "%v %v", res.Diagnostics, rec.results(""))
			assert.Equal(t, tt.wantTask, rec.result(t, "win01", "cni").Traffic)
			assert.Nil(t, rec.result(t, "win01", "after").Traffic, "print acts on no host")
			assert.Equal(t, tt.wantRecap, res.Recap[0].Traffic)
			var recap engine.Event
			for _, e := range rec.events {
				if e.Type == engine.EventRecap {
					recap = e
				}
			}
			assert.Equal(t, res.Recap, recap.Recap, "the recap event is the result's")
		})
	}
}
