//go:build linux

package setup_test

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/wsu-project/wsu/agent/platform/sim"
	"github.com/wsu-project/wsu/engine"
	"github.com/wsu-project/wsu/engine/planfile"
	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/setup"
	"github.com/wsu-project/wsu/test/harness"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
	"github.com/wsu-project/wsu/transport/agentbin"
)

const adminKeys = `C:\ProgramData\ssh\administrators_authorized_keys`

// rotateBed is a simulated Windows host behind a real sshd that reads the
// host's administrators_authorized_keys: what the playbook writes there is
// what decides who may log in.
type rotateBed struct {
	t          *testing.T
	sshd       *sshdtest.Server
	user       string
	simRoot    string
	keysFile   string // the sim's file, as sshd reads it
	knownHosts string
	agentDir   string
	old, new   sshdtest.Key
}

func newRotateBed(t *testing.T) *rotateBed {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b := &rotateBed{t: t}
	var dir string
	var err error
	b.user, dir, err = sshdtest.FastUser()
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	b.simRoot = filepath.Join(dir, "win-01", "sim")
	b.old = sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{})
	b.new = sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{})

	// The host starts out accepting the old key only.
	s, err := sim.New(b.simRoot, sim.Options{Hostname: "WIN-01"})
	require.NoError(t, err)
	require.NoError(t, s.MkdirAll(ctx, `C:\ProgramData\ssh`, 0o755))
	require.NoError(t, s.WriteFile(ctx, adminKeys, strings.NewReader(string(gossh.MarshalAuthorizedKey(b.old.Public))), 0o644))
	b.keysFile, err = s.LocalPath(adminKeys)
	require.NoError(t, err)
	chownTree(t, dir, b.user)

	b.sshd = sshdtest.StartWith(t, sshdtest.Options{AuthorizedKeysFile: b.keysFile})
	b.knownHosts = filepath.Join(t.TempDir(), "known_hosts")
	require.NoError(t, b.sshd.WriteKnownHosts(b.knownHosts))
	b.agentDir = t.TempDir()
	_, err = harness.AgentBeside(ctx, filepath.Join(b.agentDir, "no-wsu"), b.agentDir)
	require.NoError(t, err)
	return b
}

// chownTree gives dir to the SSH user, who runs the agent.
func chownTree(t *testing.T, dir, name string) {
	u, err := user.Lookup(name)
	require.NoError(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == os.Geteuid() {
		return
	}
	require.NoError(t, filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	}))
}

// inventory logs in with key.
func (b *rotateBed) inventory(key sshdtest.Key) string {
	inv := fmt.Sprintf(`[windows]
win-01 ansible_host=%s ansible_port=%d wsu_agent_path=%s wsu_agent_args="--platform sim --sim-root %s --sim-hostname WIN-01"

[windows:vars]
connection=ssh
ansible_user=%s
ansible_ssh_private_key_file=%s
ssh_known_hosts_file=%s
wsu_remote_os=linux
connect_retry_window=0s
`, b.sshd.Host, b.sshd.Port, filepath.Join(filepath.Dir(b.simRoot), "wsu"), b.simRoot, b.user, key.File, b.knownHosts)
	file := filepath.Join(b.t.TempDir(), "inventory.ini")
	require.NoError(b.t, os.WriteFile(file, []byte(inv), 0o644))
	return file
}

// run runs rotate-key and returns its result and task results by name.
func (b *rotateBed) run(mode engine.Mode, login sshdtest.Key, vars ...string) (*engine.Result, map[string]engine.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	tasks := map[string]engine.Event{}
	hooks := engine.HooksFunc(func(e engine.Event) {
		if e.Type == engine.EventTaskResult {
			mu.Lock()
			tasks[e.Task] = e
			mu.Unlock()
		}
	})
	run, diags := setup.Prepare(ctx, setup.Options{
		Request: setup.Request{Inputs: planfile.Inputs{Playbook: "wsu:rotate-key.hcl", Inventory: b.inventory(login),
			Vars: append([]string{"new_private_key_file=" + b.new.File}, vars...)}, Mode: mode},
		Hooks:  hooks,
		Agents: agentbin.New(agentbin.Options{Dir: b.agentDir}),
	})
	require.False(b.t, diags.HasErrors(), "%v", diags)
	return engine.Run(ctx, run.Request), tasks
}

// login reports whether sshd lets key in.
func (b *rotateBed) login(key sshdtest.Key) error {
	pem, err := os.ReadFile(key.File)
	require.NoError(b.t, err)
	signer, err := gossh.ParsePrivateKey(pem)
	require.NoError(b.t, err)
	hk, err := knownhosts.New(b.knownHosts)
	require.NoError(b.t, err)
	c, err := gossh.Dial("tcp", b.sshd.Addr, &gossh.ClientConfig{
		User: b.user, Auth: []gossh.AuthMethod{gossh.PublicKeys(signer)}, HostKeyCallback: hk, Timeout: 10 * time.Second})
	if err != nil {
		return err
	}
	return c.Close()
}

func (b *rotateBed) fileACL() host.ACL {
	s, err := sim.New(b.simRoot, sim.Options{Hostname: "WIN-01"})
	require.NoError(b.t, err)
	acl, err := s.FileACL(context.Background(), adminKeys)
	require.NoError(b.t, err)
	return acl
}

func statuses(tasks map[string]engine.Event) map[string]engine.Status {
	out := map[string]engine.Status{}
	for name, e := range tasks {
		out[name] = e.Status
	}
	return out
}

// TestRotateKey: plan shows the rotation, apply performs it (afterwards
// sshd refuses the old key and accepts the new one, and the file has the
// ACL Windows OpenSSH requires), and a re-run logged in with the new key
// changes nothing.
func TestRotateKey(t *testing.T) {
	b := newRotateBed(t)
	require.NoError(t, b.login(b.old))
	require.Error(t, b.login(b.new), "the new key is not authorized yet")

	res, tasks := b.run(engine.ModePlan, b.old)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, map[string]engine.Status{
		"new key given": engine.StatusOK, "authorize new key": engine.StatusChanged,
		"log in with new key": engine.StatusChanged, "old key known": engine.StatusOK,
		"remove old key": engine.StatusChanged,
	}, statuses(tasks))
	assert.Equal(t, []string{"keys added", "acl"}, changeFields(tasks["authorize new key"]))
	// A plan reads the file as it is: the old key still there, its ACL not
	// yet restricted.
	assert.Equal(t, []string{"keys removed", "acl"}, changeFields(tasks["remove old key"]))
	assert.Equal(t, string(gossh.MarshalAuthorizedKey(b.old.Public)), readKeys(t, b), "a plan changes nothing")

	res, tasks = b.run(engine.ModeApply, b.old)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, engine.StatusOK, tasks["log in with new key"].Status, "the check passed on a second connection")
	assert.Error(t, b.login(b.old), "sshd refuses the old key")
	assert.NoError(t, b.login(b.new), "sshd accepts the new key")
	assert.Equal(t, string(gossh.MarshalAuthorizedKey(b.new.Public)), readKeys(t, b))
	assert.True(t, b.fileACL().Satisfies(host.AdminsOnlyACL()), "%s", b.fileACL())

	res, tasks = b.run(engine.ModeApply, b.new)
	require.False(t, res.Failed(), "%v", res.Diagnostics)
	assert.Equal(t, 0, res.Changes)
	assert.Equal(t, map[string]engine.Status{
		"new key given": engine.StatusOK, "authorize new key": engine.StatusOK,
		"log in with new key": engine.StatusOK, "old key known": engine.StatusOK,
		"remove old key": engine.StatusSkipped,
	}, statuses(tasks))
}

// TestRotateKeyNewKeyRefused: the new key goes into a file this host's
// sshd does not read (a login user outside Administrators reads its own
// .ssh\authorized_keys), so the second login fails: the host fails, and
// the old key stays authorized and working.
func TestRotateKeyNewKeyRefused(t *testing.T) {
	b := newRotateBed(t)
	res, tasks := b.run(engine.ModeApply, b.old, `authorized_keys_file=C:\Users\wsu\.ssh\authorized_keys`)
	require.True(t, res.Failed())
	assert.Equal(t, engine.StatusChanged, tasks["authorize new key"].Status)
	check := tasks["log in with new key"]
	assert.Equal(t, engine.StatusFailed, check.Status)
	require.NotEmpty(t, check.Diagnostics)
	assert.Equal(t, "The host refuses the key", check.Diagnostics[0].Summary)
	assert.NotContains(t, tasks, "remove old key", "nothing after the failed check ran")
	assert.NoError(t, b.login(b.old), "the old key still works")
	assert.Error(t, b.login(b.new))
	assert.Equal(t, string(gossh.MarshalAuthorizedKey(b.old.Public)), readKeys(t, b))
}

func readKeys(t *testing.T, b *rotateBed) string {
	data, err := os.ReadFile(b.keysFile)
	require.NoError(t, err)
	return string(data)
}

func changeFields(e engine.Event) []string {
	if e.Change == nil {
		return nil
	}
	var names []string
	for _, f := range e.Change.Fields {
		names = append(names, f.Name)
	}
	return names
}
