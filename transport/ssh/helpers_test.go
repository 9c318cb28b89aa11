//go:build linux

package ssh

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/wsu-project/wsu/inventory"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
)

// scratch holds what the whole test binary shares (the built agent, the
// benchmark's big file); TestMain removes it.
var scratch string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "wsu-ssh-test-")
	if err != nil {
		panic(err)
	}
	scratch = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var agentBuild struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// agentBinary builds the node agent (cmd/wsu-agent) for Linux once per
// test run.
func agentBinary(t testing.TB) string {
	t.Helper()
	agentBuild.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			agentBuild.err = err
			return
		}
		agentBuild.path = filepath.Join(scratch, "wsu-agent")
		cmd := exec.Command("go", "build", "-o", agentBuild.path, "./cmd/wsu-agent")
		cmd.Dir = root
		agentBuild.out, agentBuild.err = cmd.CombinedOutput()
	})
	if agentBuild.err != nil {
		t.Fatalf("go build ./cmd/wsu-agent: %v\n%s", agentBuild.err, agentBuild.out)
	}
	return agentBuild.path
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", err
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// testCtx bounds a test: nothing here may hang.
func testCtx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// rig is a real sshd with a client key, a known_hosts file that trusts the
// server, and a place for the agent.
type rig struct {
	srv        *sshdtest.Server
	key        sshdtest.Key
	knownHosts string
	dir        string
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{srv: sshdtest.Start(t), dir: t.TempDir()}
	r.key = sshdtest.NewKey(t, r.dir, sshdtest.KeyOptions{})
	r.srv.Authorize(t, r.key.Public)
	r.knownHosts = filepath.Join(r.dir, "known_hosts")
	r.srv.AppendKnownHosts(t, r.knownHosts)
	return r
}

// vars are the inventory variables of a host on the rig's sshd, running a
// simulated Windows host, with extra ones on top ("" deletes).
func (r *rig) vars(t *testing.T, extra map[string]string) map[string]inventory.Var {
	kv := map[string]string{
		"ansible_host":                 r.srv.Host,
		"ansible_port":                 strconv.Itoa(r.srv.Port),
		"ansible_user":                 r.srv.User,
		"ansible_ssh_private_key_file": r.key.File,
		"ssh_known_hosts_file":         r.knownHosts,
		"connect_retry_window":         "0s",
		"wsu_remote_os":                "linux",
		"wsu_agent_path":               filepath.Join(r.dir, "agent", "wsu-test"),
		"wsu_agent_binary":             agentBinary(t),
		"wsu_agent_args":               "--platform sim --sim-root " + filepath.Join(r.dir, "sim"),
	}
	for k, v := range extra {
		if v == "" {
			delete(kv, k)
		} else {
			kv[k] = v
		}
	}
	return vars(kv)
}

// config parses vars as Dial would.
func (r *rig) config(t *testing.T, extra map[string]string) Config {
	t.Helper()
	cfg, err := ParseConfig("win01", r.vars(t, extra))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// uploadFile puts the local file at remote over SFTP (putFile, creating
// directories).
func uploadFile(sc *sftp.Client, local, remote string, mode fs.FileMode) (int64, error) {
	f, err := os.Open(local)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return putFile(sc, f, remote, mode, true)
}
