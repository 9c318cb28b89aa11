//go:build linux

package ssh

// These tests run against a REAL OpenSSH sshd (test/sshd).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/modules/generic"
	"github.com/wsu-project/wsu/notify"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
)

// connectOnly opens (and the cleanup closes) an SSH connection, without
// the agent.
func connectOnly(t *testing.T, cfg Config) error {
	t.Helper()
	return connectOnlyWith(t, nil, cfg)
}

// connectOnlyWith is connectOnly for a run whose passphrases are pp.
func connectOnlyWith(t *testing.T, pp *Passphrases, cfg Config) error {
	t.Helper()
	c, err := connect(WithPassphrases(testCtx(t, time.Minute), pp), cfg)
	if err == nil {
		t.Cleanup(c.Close)
		sess, err := c.client.NewSession()
		require.NoError(t, err, "a session on the new connection")
		sess.Close()
	}
	return err
}

// TestKeyPassphrasePrompt: with no WSU_SSH_PASSPHRASE, an encrypted key's
// passphrase is asked for through the prompt the CLI installs on a
// terminal — once per key, however many hosts connect with it at once.
// The prompt here is a FAKE terminal that answers from a script.
func TestKeyPassphrasePrompt(t *testing.T) {
	r := newRig(t)
	key := sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{Type: "ed25519", Passphrase: "typed at the tty"})
	r.srv.Authorize(t, key.Public)
	t.Setenv(PassphraseEnv, "")
	os.Unsetenv(PassphraseEnv)

	var mu sync.Mutex
	var asked []string
	answers := []string{"wrong guess", "typed at the tty"}
	run := NewPassphrases(func(what string) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, what)
		a := answers[0]
		answers = answers[1:]
		return []byte(a), nil
	})
	cfg := r.config(t, map[string]string{"ansible_ssh_private_key_file": key.File})

	err := connectOnlyWith(t, run, cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the passphrase typed is wrong")

	// Three hosts at once with the same key: one more prompt, three connections.
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = connectOnlyWith(t, run, cfg) }()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, []string{key.File, key.File}, asked, "asked once after the wrong guess, for the key file")

	// Another run does not see this run's typed passphrase.
	other := NewPassphrases(func(string) ([]byte, error) { return nil, errors.New("no terminal in this run") })
	err = connectOnlyWith(t, other, cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no terminal in this run")

	// Without a terminal (no prompt installed) the error says what to do.
	err = connectOnly(t, cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WSU_SSH_PASSPHRASE, or run wsu on a terminal")
}

func TestKeyAuth(t *testing.T) {
	r := newRig(t)
	tests := []struct {
		name       string
		key        sshdtest.KeyOptions
		authorize  bool
		passphrase *string // WSU_SSH_PASSPHRASE; nil: unset
		inline     bool    // give the key's text in ssh_private_key instead of its file
		wantErr    string
	}{
		{name: "ed25519 openssh", key: sshdtest.KeyOptions{Type: "ed25519"}, authorize: true},
		{name: "rsa pem", key: sshdtest.KeyOptions{Type: "rsa", PEM: true}, authorize: true},
		{name: "rsa openssh", key: sshdtest.KeyOptions{Type: "rsa"}, authorize: true},
		{name: "ed25519 encrypted", key: sshdtest.KeyOptions{Type: "ed25519", Passphrase: "s3cret phrase"}, authorize: true, passphrase: ptr("s3cret phrase")},
		{name: "rsa pem encrypted", key: sshdtest.KeyOptions{Type: "rsa", PEM: true, Passphrase: "pem-pass"}, authorize: true, passphrase: ptr("pem-pass")},
		{name: "encrypted without passphrase", key: sshdtest.KeyOptions{Passphrase: "x"}, authorize: true,
			wantErr: "is encrypted: put its passphrase in the environment variable WSU_SSH_PASSPHRASE, or run wsu on a terminal to be asked for it"},
		{name: "wrong passphrase", key: sshdtest.KeyOptions{Passphrase: "x"}, authorize: true, passphrase: ptr("y"),
			wantErr: "the passphrase in WSU_SSH_PASSPHRASE is wrong"},
		{name: "key not authorized", key: sshdtest.KeyOptions{}, authorize: false,
			wantErr: "unable to authenticate"},
		{name: "inline ed25519", key: sshdtest.KeyOptions{Type: "ed25519"}, authorize: true, inline: true},
		{name: "inline rsa pem", key: sshdtest.KeyOptions{Type: "rsa", PEM: true}, authorize: true, inline: true},
		{name: "inline encrypted", key: sshdtest.KeyOptions{Passphrase: "inline-pass"}, authorize: true, inline: true, passphrase: ptr("inline-pass")},
		{name: "inline encrypted without passphrase", key: sshdtest.KeyOptions{Passphrase: "x"}, authorize: true, inline: true,
			wantErr: "the private key in ssh_private_key is encrypted: put its passphrase in the environment variable WSU_SSH_PASSPHRASE"},
		{name: "inline key not authorized", key: sshdtest.KeyOptions{}, authorize: false, inline: true,
			wantErr: "unable to authenticate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := sshdtest.NewKey(t, t.TempDir(), tt.key)
			if tt.authorize {
				r.srv.Authorize(t, key.Public)
			}
			if tt.passphrase != nil {
				t.Setenv(PassphraseEnv, *tt.passphrase)
			} else {
				t.Setenv(PassphraseEnv, "")
				os.Unsetenv(PassphraseEnv)
			}
			extra := map[string]string{"ansible_ssh_private_key_file": key.File}
			offered := "the private key " + key.File
			if tt.inline {
				text, err := os.ReadFile(key.File)
				require.NoError(t, err)
				extra = map[string]string{"ansible_ssh_private_key_file": "", "ssh_private_key": string(text)}
				offered = "the private key in ssh_private_key"
			}
			err := connectOnly(t, r.config(t, extra))
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotContains(t, err.Error(), "PRIVATE KEY", "errors never quote the key")
			if tt.wantErr == "unable to authenticate" {
				assert.Contains(t, err.Error(), "offered "+offered)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestHostKeyPolicy(t *testing.T) {
	r := newRig(t)
	ed, rsa := r.srv.HostKeys[0], r.srv.HostKeys[1]
	other := sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{}).Public
	authorized := func(k gossh.PublicKey) string { return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))) }
	hostName := "[127.0.0.1]:" + strconv.Itoa(r.srv.Port)

	tests := []struct {
		name       string
		knownHosts string // file content; "-": no file
		extra      map[string]string
		wantErr    []string
	}{
		{name: "known", knownHosts: strings.Join(r.srv.KnownHostsLines(), "\n")},
		{name: "only the rsa key known", knownHosts: hostName + " " + authorized(rsa)},
		{name: "unknown", knownHosts: "-", wantErr: []string{
			"host key of 127.0.0.1:" + strconv.Itoa(r.srv.Port) + " is not known",
			"ssh-keyscan -p " + strconv.Itoa(r.srv.Port) + " 127.0.0.1 >> ",
			"ssh_host_key=",
			"ssh_trust_on_first_use=true",
		}},
		{name: "known hosts mismatch", knownHosts: hostName + " " + authorized(other), wantErr: []string{
			"host key mismatch", gossh.FingerprintSHA256(other), gossh.FingerprintSHA256(ed), "ssh-keygen -R '" + hostName + "'",
		}},
		{name: "pinned", knownHosts: "-", extra: map[string]string{"ssh_host_key": authorized(rsa)}},
		{name: "pinned mismatch", knownHosts: strings.Join(r.srv.KnownHostsLines(), "\n"), extra: map[string]string{"ssh_host_key": authorized(other)},
			wantErr: []string{"host key mismatch", "ssh_host_key pins ssh-ed25519 " + gossh.FingerprintSHA256(other), "the host presented ssh-ed25519 " + gossh.FingerprintSHA256(ed)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "known_hosts")
			if tt.knownHosts != "-" {
				require.NoError(t, os.WriteFile(file, []byte(tt.knownHosts+"\n"), 0o600))
			}
			extra := map[string]string{"ssh_known_hosts_file": file}
			for k, v := range tt.extra {
				extra[k] = v
			}
			err := connectOnly(t, r.config(t, extra))
			if len(tt.wantErr) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			var hk *HostKeyError
			assert.True(t, errors.As(err, &hk), "a HostKeyError: %v", err)
			for _, w := range tt.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

// notices collects what a transport reports, for tests.
type notices struct {
	mu   sync.Mutex
	list []notify.Notice
	// arrived is signalled (without blocking) on every notice.
	arrived chan struct{}
}

func newNotices() *notices { return &notices{arrived: make(chan struct{}, 1)} }

func (n *notices) add(x notify.Notice) {
	n.mu.Lock()
	n.list = append(n.list, x)
	n.mu.Unlock()
	select {
	case n.arrived <- struct{}{}:
	default:
	}
}

func (n *notices) get() []notify.Notice {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]notify.Notice(nil), n.list...)
}

func TestTrustOnFirstUse(t *testing.T) {
	r := newRig(t)
	file := filepath.Join(t.TempDir(), "new", "known_hosts")
	got := newNotices()
	cfg := r.config(t, map[string]string{"ssh_known_hosts_file": file, "ssh_trust_on_first_use": "true"})
	cfg.Notify = got.add
	require.NoError(t, connectOnly(t, cfg))

	// The key was recorded, and the user was told so, as OpenSSH's
	// "Permanently added ... to the list of known hosts" does.
	ws := got.get()
	require.Len(t, ws, 1, "one warning for the recorded key: %v", ws)
	w := ws[0]
	assert.Equal(t, notify.Warning, w.Kind)
	assert.Equal(t, "win01", w.Host)
	var fingerprints []string
	for _, k := range r.srv.HostKeys {
		fingerprints = append(fingerprints, k.Type()+" "+gossh.FingerprintSHA256(k))
	}
	text := w.String()
	assert.Contains(t, text, "Permanently added the host key of '[127.0.0.1]:"+strconv.Itoa(r.srv.Port)+"'")
	assert.Contains(t, text, "list of known hosts "+file)
	assert.Contains(t, text, "ssh-keygen -R '[127.0.0.1]:"+strconv.Itoa(r.srv.Port)+"' -f "+file)
	found := false
	for _, fp := range fingerprints {
		found = found || strings.Contains(text, fp)
	}
	assert.True(t, found, "the warning %q names the key type and SHA256 fingerprint of one of the host's keys %v", text, fingerprints)

	fi, err := os.Stat(file)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm())
	b, _ := os.ReadFile(file)
	assert.Contains(t, string(b), "[127.0.0.1]:"+strconv.Itoa(r.srv.Port)+" ")

	// The recorded key is now trusted without TOFU, and a known key
	// warns of nothing.
	cfg = r.config(t, map[string]string{"ssh_known_hosts_file": file, "ssh_trust_on_first_use": "true"})
	cfg.Notify = got.add
	require.NoError(t, connectOnly(t, cfg))
	require.NoError(t, connectOnly(t, r.config(t, map[string]string{"ssh_known_hosts_file": file})))
	assert.Len(t, got.get(), 1, "no warning for a key already known")
	// TOFU never overrides a mismatch.
	other := sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{}).Public
	require.NoError(t, os.WriteFile(file, []byte("[127.0.0.1]:"+strconv.Itoa(r.srv.Port)+" "+string(gossh.MarshalAuthorizedKey(other))), 0o600))
	err = connectOnly(t, r.config(t, map[string]string{"ssh_known_hosts_file": file, "ssh_trust_on_first_use": "true"}))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "host key mismatch")
}

func TestRetry(t *testing.T) {
	t.Run("refused until the host is up", func(t *testing.T) {
		r := newRig(t)
		r.srv.Stop()
		done := make(chan error, 1)
		go func() {
			done <- connectOnlyErr(t, r.config(t, map[string]string{"connect_retry_window": "1m"}))
		}()
		time.Sleep(2 * time.Second)
		r.srv.Restart(t)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("no connection a minute after sshd came back")
		}
	})
	t.Run("refused: gives up and lists the attempts", func(t *testing.T) {
		r := newRig(t)
		r.srv.Stop()
		start := time.Now()
		err := connectOnly(t, r.config(t, map[string]string{"connect_retry_window": "3s"}))
		require.Error(t, err)
		assert.Less(t, time.Since(start), 10*time.Second)
		var ce *ConnectError
		require.True(t, errors.As(err, &ce))
		assert.Greater(t, len(ce.Attempts), 1)
		assert.Contains(t, err.Error(), "connection refused")
		assert.Contains(t, err.Error(), "connect_retry_window = 3s")
		assert.Regexp(t, `attempts 1-\d+ at \+`, err.Error())
	})
	t.Run("early auth failures: key authorized while retrying", func(t *testing.T) {
		r := newRig(t)
		key := sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{})
		cfg := r.config(t, map[string]string{"ansible_ssh_private_key_file": key.File, "connect_retry_window": "1m", "auth_retry_window": "1m"})
		done := make(chan error, 1)
		go func() { done <- connectOnlyErr(t, cfg) }()
		time.Sleep(2 * time.Second)
		r.srv.Authorize(t, key.Public)
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatal("no connection a minute after the key was authorized")
		}
	})
	t.Run("auth failures: gives up after auth_retry_window", func(t *testing.T) {
		r := newRig(t)
		key := sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{})
		err := connectOnly(t, r.config(t, map[string]string{"ansible_ssh_private_key_file": key.File, "connect_retry_window": "1m", "auth_retry_window": "2s"}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "authentication failures are retried for auth_retry_window = 2s")
		assert.Contains(t, err.Error(), "unable to authenticate")
	})
	t.Run("host key errors are not retried", func(t *testing.T) {
		r := newRig(t)
		start := time.Now()
		err := connectOnly(t, r.config(t, map[string]string{"connect_retry_window": "1m", "ssh_known_hosts_file": filepath.Join(t.TempDir(), "none")}))
		require.Error(t, err)
		assert.Less(t, time.Since(start), 20*time.Second)
		var ce *ConnectError
		require.True(t, errors.As(err, &ce))
		assert.Len(t, ce.Attempts, 1)
	})
}

// connectOnlyErr is connectOnly for goroutines (no require).
func connectOnlyErr(t *testing.T, cfg Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := connect(ctx, cfg)
	if err == nil {
		c.Close()
	}
	return err
}

func TestKeepaliveKeepsAHealthyConnection(t *testing.T) {
	r := newRig(t)
	c, err := connect(testCtx(t, time.Minute), r.config(t, map[string]string{"keepalive_interval": "100ms", "keepalive_count_max": "10"}))
	require.NoError(t, err)
	defer c.Close()
	time.Sleep(2 * time.Second) // twenty keepalives, each answered
	dead, why := c.dead()
	assert.False(t, dead, "%v", why)
}

func TestPasswordAuth(t *testing.T) {
	r := newRig(t)
	user, pw := sshdtest.PasswordUser(t)
	dir := sshdtest.UserDir(t)
	t.Setenv("SSH_AUTH_SOCK", "")
	tests := []struct {
		name    string
		pw      string
		wantErr string
	}{
		{"right password", pw, ""},
		{"wrong password", pw + "x", "unable to authenticate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := r.vars(t, map[string]string{
				"ansible_user":                 user,
				"ansible_ssh_private_key_file": "",
				"ansible_password":             tt.pw,
				"wsu_agent_path":               filepath.Join(dir, "wsu"),
				"wsu_agent_args":               "--platform sim --sim-root " + filepath.Join(dir, "sim"),
			})
			h, err := Dial(testCtx(t, 2*time.Minute), "win01", v)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "offered the password")
				return
			}
			require.NoError(t, err)
			defer h.Close()
			out, err := h.Run(testCtx(t, time.Minute), host.RunRequest{Argv: []string{"id", "-un"}})
			require.NoError(t, err)
			assert.Equal(t, user, strings.TrimSpace(string(out.Stdout)))
		})
	}
}

func TestProxyJump(t *testing.T) {
	target := newRig(t)
	bastion := sshdtest.Start(t)
	bastion.Authorize(t, target.key.Public)
	bastion.AppendKnownHosts(t, target.knownHosts)
	jump := bastion.User + "@" + bastion.Addr

	// wsu's proxy_jump, and the forms Ansible inventories use.
	forms := []struct{ name, variable, value string }{
		{"proxy_jump", "proxy_jump", jump},
		{"ansible_ssh_common_args -o ProxyJump", "ansible_ssh_common_args", "-o ProxyJump=" + jump},
		{"ansible_ssh_extra_args -J", "ansible_ssh_extra_args", "-J " + jump},
		{"ansible_ssh_common_args ProxyCommand ssh -W", "ansible_ssh_common_args",
			`-o ProxyCommand="ssh -W %h:%p -q -p ` + strconv.Itoa(bastion.Port) + " " + bastion.User + "@" + bastion.Host + `"`},
	}
	for _, form := range forms {
		t.Run(form.name, func(t *testing.T) {
			before := strings.Count(bastion.Log(), "Accepted publickey for "+bastion.User)
			h, err := Dial(testCtx(t, 2*time.Minute), "win01", target.vars(t, map[string]string{form.variable: form.value}))
			require.NoError(t, err)
			defer h.Close()
			assert.Equal(t, &JumpHost{User: bastion.User, Host: bastion.Host, Port: bastion.Port}, h.(*Host).cfg.ProxyJump)
			f, err := h.Facts(testCtx(t, time.Minute))
			require.NoError(t, err)
			assert.Equal(t, "windows", f.OS)
			assert.Equal(t, before+1, strings.Count(bastion.Log(), "Accepted publickey for "+bastion.User), "the connection went through the bastion")
		})
	}

	t.Run("the jump host's key is verified too", func(t *testing.T) {
		kh := filepath.Join(t.TempDir(), "known_hosts")
		require.NoError(t, os.WriteFile(kh, []byte(strings.Join(target.srv.KnownHostsLines(), "\n")+"\n"), 0o600))
		err := connectOnly(t, target.config(t, map[string]string{"proxy_jump": jump, "ssh_known_hosts_file": kh}))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "jump host "+bastion.Addr)
		assert.Contains(t, err.Error(), "is not known")
	})
}

func TestUploadVerifiesAndReplaces(t *testing.T) {
	r := newRig(t)
	c, err := connect(testCtx(t, time.Minute), r.config(t, nil))
	require.NoError(t, err)
	defer c.Close()
	sc, err := newSFTP(c.client)
	require.NoError(t, err)
	defer sc.Close()

	dir := filepath.Join(r.dir, "up", "deep")
	remote := filepath.Join(dir, "file.bin")
	for i, size := range []int{5<<20 + 17, 1 << 10} {
		local := filepath.Join(t.TempDir(), "src")
		data := randomBytes(size, uint64(i))
		require.NoError(t, os.WriteFile(local, data, 0o644))
		n, err := uploadFile(sc, local, remote, 0o755)
		require.NoError(t, err)
		assert.Equal(t, int64(size), n)

		got, err := os.ReadFile(remote)
		require.NoError(t, err)
		assert.Equal(t, sha256.Sum256(data), sha256.Sum256(got), "upload %d", i)
		fi, _ := os.Stat(remote)
		assert.Equal(t, fs.FileMode(0o755), fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "no temp file left beside the target")
	_, ok := sc.HasExtension("posix-rename@openssh.com")
	assert.True(t, ok, "OpenSSH offers posix-rename")
}

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	rng := rand.NewChaCha8([32]byte{byte(seed)})
	rng.Read(b)
	return b
}

func TestAgentSession(t *testing.T) {
	r := newRig(t)
	ctx := testCtx(t, 2*time.Minute)
	hh, err := Dial(ctx, "win01", r.vars(t, nil))
	require.NoError(t, err)
	h := hh.(*Host)
	defer h.Close()

	want, _ := fileSHA256Uncached(agentBinary(t))
	assert.Equal(t, want, h.Hello().AgentSHA256)
	assert.Equal(t, "sim", h.Hello().Platform)
	bin, err := os.Stat(agentBinary(t))
	require.NoError(t, err)
	assert.Equal(t, host.Counters{AgentBytes: bin.Size()}, h.Counters(), "the first contact deploys the agent")

	f, err := h.Facts(ctx)
	require.NoError(t, err)
	assert.Equal(t, "windows", f.OS)
	assert.Equal(t, "sim-host", f.Hostname)

	require.NoError(t, h.MkdirAll(ctx, `C:\k\logs`, 0o755))
	content := randomBytes(3<<20, 7) // more than one data frame
	require.NoError(t, h.WriteFile(ctx, `C:\k\blob.bin`, bytes.NewReader(content), 0o644))
	st, err := h.Stat(ctx, `C:\k\blob.bin`)
	require.NoError(t, err)
	assert.True(t, st.Exists)
	assert.Equal(t, int64(len(content)), st.Size)
	sum, err := h.SHA256(ctx, `C:\k\blob.bin`)
	require.NoError(t, err)
	want256 := sha256.Sum256(content)
	assert.Equal(t, hex.EncodeToString(want256[:]), sum)
	back, err := h.ReadFile(ctx, `C:\k\blob.bin`, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(content, back))

	res, err := h.Run(ctx, host.RunRequest{Argv: []string{"sh", "-c", "cat; echo err >&2; exit 3"}, Stdin: []byte("in")})
	require.NoError(t, err)
	assert.Equal(t, 3, res.ExitCode)
	assert.Equal(t, "in", string(res.Stdout))
	assert.Equal(t, "err\n", string(res.Stderr))

	require.NoError(t, h.EnvSet(ctx, "WSU_TEST", "1"))
	v, ok, err := h.EnvGet(ctx, "WSU_TEST")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, "1", v)

	require.NoError(t, h.Remove(ctx, `C:\k`, true))
	st, err = h.Stat(ctx, `C:\k\blob.bin`)
	require.NoError(t, err)
	assert.False(t, st.Exists)

	// A missing file is the same error through SSH as locally.
	_, err = h.ReadFile(ctx, `C:\k\nope`, 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// Facts came with the hello; stdin is not payload.
	assert.Equal(t, host.Counters{
		RPCs: 11,
		RPCsByOp: map[string]int64{
			"fs.mkdir": 1, "fs.write": 1, "fs.stat": 2, "fs.sha256": 1, "fs.read": 2,
			"proc.run": 1, "env.set": 1, "env.get": 1, "fs.remove": 1,
		},
		BytesSent:  int64(len(content)),
		AgentBytes: bin.Size(),
	}, h.Counters())
	again, err := Dial(ctx, "win01", r.vars(t, nil))
	require.NoError(t, err)
	assert.Equal(t, host.Counters{}, again.(host.Metered).Counters(), "the agent in place is current: nothing uploaded")
	require.NoError(t, again.Close())

	assert.False(t, h.Lost())
	agentPath := h.Config().AgentPath
	require.True(t, agentRunning(agentPath))
	require.NoError(t, h.Close())
	assert.False(t, h.Lost(), "a closed host is not lost")
	assert.Eventually(t, func() bool { return !agentRunning(agentPath) }, 10*time.Second, 50*time.Millisecond,
		"Close ends the agent on the host")
	_, err = h.Stat(ctx, `C:\k`)
	assert.Error(t, err)
}

func TestRedeploy(t *testing.T) {
	r := newRig(t)
	bin := agentBinary(t)
	want, _ := fileSHA256Uncached(bin)
	agentPath := filepath.Join(r.dir, "agent", "wsu-test")
	tests := []struct {
		name   string
		damage func(t *testing.T)
	}{
		{"missing", func(t *testing.T) { require.NoError(t, os.Remove(agentPath)) }},
		{"corrupted", func(t *testing.T) {
			f, err := os.OpenFile(agentPath, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt([]byte("garbage!"), 4096)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}},
		{"another build", func(t *testing.T) {
			// Starts and answers, but with the wrong sha256.
			b, err := os.ReadFile(bin)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(agentPath, append(b, "another build"...), 0o755))
		}},
		{"older protocol", func(t *testing.T) {
			// An agent that greets with protocol 0: a *proto.MismatchError.
			require.NoError(t, os.WriteFile(agentPath, []byte("#!/bin/sh\necho 'WSU-AGENT/0 0.0.1 0000'\ncat >/dev/null\n"), 0o755))
		}},
		{"not an agent", func(t *testing.T) {
			require.NoError(t, os.WriteFile(agentPath, []byte("#!/bin/sh\necho 'wsu 0.0.1: unknown command agent' >&2\nexit 2\n"), 0o755))
		}},
	}
	h, err := Dial(testCtx(t, 2*time.Minute), "win01", r.vars(t, nil))
	require.NoError(t, err)
	h.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.damage(t)
			got, err := fileSHA256Uncached(agentPath)
			if err == nil {
				require.NotEqual(t, want, got)
			}
			h, err := Dial(testCtx(t, 2*time.Minute), "win01", r.vars(t, nil))
			require.NoError(t, err)
			defer h.Close()
			assert.Equal(t, want, h.(*Host).Hello().AgentSHA256)
			got, err = fileSHA256Uncached(agentPath)
			require.NoError(t, err)
			assert.Equal(t, want, got, "the remote binary was replaced")
			_, err = h.Facts(testCtx(t, time.Minute))
			require.NoError(t, err)
		})
	}
}

func fileSHA256Uncached(p string) (string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:]), nil
}

func TestModuleRun(t *testing.T) {
	r := newRig(t)
	ctx := testCtx(t, 2*time.Minute)
	h, err := Dial(ctx, "win01", r.vars(t, nil))
	require.NoError(t, err)
	defer h.Close()

	m := generic.File{}
	cfg := moduleConfig(t, m, map[string]cty.Value{
		"path":    cty.StringVal(`C:\k\x.txt`),
		"content": cty.StringVal("hello from wsu over ssh\n"),
	})
	plan := m.Plan(ctx, modules.PlanRequest{Config: cfg, Host: h})
	require.False(t, plan.Diagnostics.HasErrors(), "%v", plan.Diagnostics)
	require.NotNil(t, plan.Change, "a new file is a change")
	apply := m.Apply(ctx, modules.ApplyRequest{Config: cfg, Host: h, Change: plan.Change})
	require.False(t, apply.Diagnostics.HasErrors(), "%v", apply.Diagnostics)

	got, err := h.ReadFile(ctx, `C:\k\x.txt`, 0)
	require.NoError(t, err)
	assert.Equal(t, "hello from wsu over ssh\n", string(got))
	again := m.Plan(ctx, modules.PlanRequest{Config: cfg, Host: h})
	require.False(t, again.Diagnostics.HasErrors(), "%v", again.Diagnostics)
	assert.Nil(t, again.Change, "in sync after apply")
}

// moduleConfig builds a module Config as the engine does: every attribute,
// defaults applied.
func moduleConfig(t *testing.T, m modules.Module, set map[string]cty.Value) modules.Config {
	t.Helper()
	vals := map[string]cty.Value{}
	for _, a := range m.Schema().Attributes {
		v, ok := set[a.Name]
		switch {
		case ok:
		case a.Default != cty.NilVal:
			v = a.Default
		default:
			v = cty.NullVal(a.Type)
		}
		vals[a.Name] = v
	}
	return modules.Config{Value: cty.ObjectVal(vals)}
}

func TestSSHAgentAuth(t *testing.T) {
	r := newRig(t)
	sock := startSSHAgent(t)
	key := sshdtest.NewKey(t, t.TempDir(), sshdtest.KeyOptions{Type: "rsa"})
	r.srv.Authorize(t, key.Public)
	add := exec.Command("ssh-add", key.File)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	out, err := add.CombinedOutput()
	require.NoError(t, err, "ssh-add: %s", out)

	t.Setenv("SSH_AUTH_SOCK", sock)
	// No key file and no password: the agent's keys are used, also for
	// the jump host.
	bastion := sshdtest.Start(t)
	bastion.Authorize(t, key.Public)
	bastion.AppendKnownHosts(t, r.knownHosts)
	for _, jump := range []string{"", bastion.User + "@" + bastion.Addr} {
		extra := map[string]string{"ansible_ssh_private_key_file": ""}
		if jump != "" {
			extra["proxy_jump"] = jump
		}
		require.NoError(t, connectOnly(t, r.config(t, extra)), "proxy_jump=%q", jump)
	}
}

// startSSHAgent runs an ssh-agent for the test and returns its socket.
func startSSHAgent(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("ssh-agent"); err != nil {
		t.Fatal("ssh-agent is not installed: apt-get install -y --no-install-recommends openssh-client")
	}
	sock := filepath.Join(t.TempDir(), "agent.sock")
	cmd := exec.Command("ssh-agent", "-D", "-a", sock)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(sock); err == nil {
			return sock
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("ssh-agent did not create its socket")
	return ""
}

// agentRunning reports whether a process runs the binary at path.
func agentRunning(path string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.HasPrefix(b, []byte(path+"\x00agent")) {
			return true
		}
	}
	return false
}

// TestKeyboardInteractiveAuth: the password is also offered as
// keyboard-interactive (Windows and PAM setups that offer only that),
// against a real sshd that allows nothing else (AuthenticationMethods
// keyboard-interactive, answered by PAM's pam_unix); a wrong password is
// refused.
func TestKeyboardInteractiveAuth(t *testing.T) {
	srv := sshdtest.StartWith(t, sshdtest.Options{KbdInteractiveOnly: true})
	user, pw := sshdtest.PasswordUser(t)
	dir := sshdtest.UserDir(t)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	srv.AppendKnownHosts(t, kh)
	t.Setenv("SSH_AUTH_SOCK", "")
	for _, tt := range []struct {
		name, pw, wantErr string
	}{
		{"right password", pw, ""},
		{"wrong password", pw + "x", "unable to authenticate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := ParseConfig("win01", vars(map[string]string{
				"ansible_host":         srv.Host,
				"ansible_port":         strconv.Itoa(srv.Port),
				"ansible_user":         user,
				"ansible_password":     tt.pw,
				"ssh_known_hosts_file": kh,
				"connect_retry_window": "0s",
				"wsu_remote_os":        "linux",
				"wsu_agent_path":       filepath.Join(dir, "wsu"),
				"wsu_agent_binary":     agentBinary(t),
				"wsu_agent_args":       "--platform sim --sim-root " + filepath.Join(dir, "sim"),
			}))
			require.NoError(t, err)
			accepted := "Accepted keyboard-interactive/pam for " + user
			before := strings.Count(srv.Log(), accepted)
			err = connectOnly(t, cfg)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Contains(t, err.Error(), "keyboard-interactive", "the server offered keyboard-interactive only")
				assert.Equal(t, before, strings.Count(srv.Log(), accepted))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, before+1, strings.Count(srv.Log(), accepted))
			assert.NotContains(t, srv.Log(), "Accepted password", "password authentication is off on this sshd")
		})
	}
}
