package ssh

import (
	"context"
	"crypto/ed25519"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/transport/agentbin"
	"github.com/wsu-project/wsu/version"
)

// vars builds inventory variables as an INI inventory would (strings).
func vars(kv map[string]string) map[string]inventory.Var {
	out := map[string]inventory.Var{}
	for k, v := range kv {
		out[k] = inventory.Var{Value: cty.StringVal(v), Range: hcl.Range{Filename: "inventory.ini", Start: hcl.Pos{Line: 3, Column: 10}}}
	}
	return out
}

// testPrivateKey is an unencrypted ed25519 key made for these tests.
var testPrivateKey = func() string {
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "config test")
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(block))
}()

const testHostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEmH4bPe6a2hT7Qyq7JDD8ph1eDvnFJjXOdTxXCiuAmQ test"

func TestParseConfig(t *testing.T) {
	home, _ := os.UserHomeDir()
	linux := map[string]string{"wsu_remote_os": "linux", "wsu_agent_binary": "/bin/true"}
	with := func(base map[string]string, kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	tests := []struct {
		name  string
		vars  map[string]string
		check func(t *testing.T, c Config)
	}{
		{"defaults", linux, func(t *testing.T, c Config) {
			assert.Equal(t, "win01", c.Host)
			assert.Equal(t, 22, c.Port)
			assert.Equal(t, currentUser(), c.User)
			assert.Equal(t, filepath.Join(home, ".ssh", "known_hosts"), c.KnownHostsFile)
			assert.Equal(t, DefaultConnectTimeout, c.ConnectTimeout)
			assert.Equal(t, DefaultConnectRetryWindow, c.ConnectRetryWindow)
			assert.Equal(t, DefaultAuthRetryWindow, c.AuthRetryWindow)
			assert.Equal(t, DefaultKeepaliveInterval, c.KeepaliveInterval)
			assert.Equal(t, ".wsu/wsu-"+version.Version, c.AgentPath)
			assert.False(t, c.TrustOnFirstUse)
			assert.Nil(t, c.HostKey)
			assert.Nil(t, c.ProxyJump)
		}},
		{"ansible names", with(linux,
			"ansible_host", "10.0.0.5", "ansible_port", "2222", "ansible_user", "Administrator",
			"ansible_ssh_private_key_file", "~/.ssh/win", "ansible_ssh_pass", "pw"),
			func(t *testing.T, c Config) {
				assert.Equal(t, "10.0.0.5:2222", c.Addr())
				assert.Equal(t, "Administrator", c.User)
				assert.Equal(t, filepath.Join(home, ".ssh/win"), c.PrivateKeyFile)
				assert.Equal(t, "pw", c.Password)
			}},
		{"wsu names win", with(linux, "private_key_file", "/k", "ansible_ssh_private_key_file", "/other"),
			func(t *testing.T, c Config) {
				assert.Equal(t, "/k", c.PrivateKeyFile)
			}},
		{"plain host variables are not connection settings", with(linux, "host", "db.internal", "port", "5432", "user", "appuser", "password", "x",
			"ansible_host", "10.0.0.5", "ansible_port", "22", "ansible_user", "Administrator"),
			func(t *testing.T, c Config) {
				assert.Equal(t, "10.0.0.5:22", c.Addr())
				assert.Equal(t, "Administrator", c.User)
				assert.Empty(t, c.Password)
			}},
		{"durations and flags", with(linux, "connect_timeout", "45", "connect_retry_window", "90s", "auth_retry_window", "10m",
			"keepalive_interval", "0", "op_timeout", "1h", "ssh_trust_on_first_use", "yes"),
			func(t *testing.T, c Config) {
				assert.Equal(t, 45*time.Second, c.ConnectTimeout)
				assert.Equal(t, 90*time.Second, c.ConnectRetryWindow)
				assert.Equal(t, 90*time.Second, c.AuthRetryWindow, "capped by connect_retry_window")
				assert.Equal(t, time.Duration(0), c.KeepaliveInterval)
				assert.Equal(t, time.Hour, c.OpTimeout)
				assert.True(t, c.TrustOnFirstUse)
			}},
		{"pinned key and jump", with(linux, "ssh_host_key", testHostKey, "proxy_jump", "ops@bastion:2200"),
			func(t *testing.T, c Config) {
				require.NotNil(t, c.HostKey)
				assert.Equal(t, "ssh-ed25519", c.HostKey.Type())
				assert.Equal(t, &JumpHost{User: "ops", Host: "bastion", Port: 2200}, c.ProxyJump)
			}},
		{"agent args string", with(linux, "wsu_agent_args", " --platform sim  --sim-root /tmp/x "),
			func(t *testing.T, c Config) {
				assert.Equal(t, []string{"--platform", "sim", "--sim-root", "/tmp/x"}, c.AgentArgs)
				assert.Equal(t, c.AgentPath+" agent --platform sim --sim-root /tmp/x", agentCommand(c))
			}},
		{"inline key", with(linux, "ssh_private_key", testPrivateKey), func(t *testing.T, c Config) {
			assert.Equal(t, strings.TrimSpace(testPrivateKey), c.PrivateKey)
			assert.Empty(t, c.PrivateKeyFile)
		}},
		{"windows agent path", with(linux, "wsu_remote_os", "windows", "wsu_agent_path", `C:\k\wsu\wsu.exe`),
			func(t *testing.T, c Config) {
				assert.Equal(t, `C:\k\wsu\wsu.exe agent`, agentCommand(c))
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig("win01", vars(tt.vars))
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

func TestParseConfigTyped(t *testing.T) {
	// YAML inventories give numbers, bools and lists.
	v := map[string]inventory.Var{
		"ansible_port":           {Value: cty.NumberIntVal(2222)},
		"ssh_trust_on_first_use": {Value: cty.True},
		"connect_timeout":        {Value: cty.NumberFloatVal(1.5)},
		"wsu_agent_args":         {Value: cty.TupleVal([]cty.Value{cty.StringVal("--platform"), cty.StringVal("sim")})},
		"wsu_remote_os":          {Value: cty.StringVal("Linux")},
		"wsu_agent_binary":       {Value: cty.StringVal("/bin/true")},
		"ansible_password":       {Value: cty.StringVal("secret").Mark("sensitive")},
		"ssh_private_key":        {Value: cty.StringVal(testPrivateKey).Mark("sensitive")},
	}
	c, err := ParseConfig("h", v)
	require.NoError(t, err)
	assert.Equal(t, 2222, c.Port)
	assert.True(t, c.TrustOnFirstUse)
	assert.Equal(t, 1500*time.Millisecond, c.ConnectTimeout)
	assert.Equal(t, []string{"--platform", "sim"}, c.AgentArgs)
	assert.Equal(t, "linux", c.RemoteOS)
	assert.Equal(t, "secret", c.Password)
	assert.Equal(t, strings.TrimSpace(testPrivateKey), c.PrivateKey, "a sensitive key is read through its mark")
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		vars map[string]string
		want string
	}{
		{"port", map[string]string{"ansible_port": "ssh"}, "inventory.ini:3:10: ansible_port must be a whole number"},
		{"port range", map[string]string{"ansible_port": "70000"}, `ansible_port must be a whole number from 1 to 65535, not "70000"`},
		{"bool", map[string]string{"ssh_trust_on_first_use": "maybe"}, "ssh_trust_on_first_use must be true or false"},
		{"duration", map[string]string{"connect_retry_window": "soon"}, `connect_retry_window must be a duration such as "30s"`},
		{"remote os", map[string]string{"wsu_remote_os": "mac"}, `wsu_remote_os must be windows or linux, not "mac"`},
		{"path with space", map[string]string{"wsu_remote_os": "windows", "wsu_agent_path": `C:\Program Files\wsu.exe`}, "contains a space"},
		{"relative windows path", map[string]string{"wsu_remote_os": "windows", "wsu_agent_path": `wsu\wsu.exe`}, "not an absolute Windows path"},
		{"shell characters", map[string]string{"wsu_agent_path": "/tmp/x;rm"}, "characters a shell would interpret"},
		{"quoted arg", map[string]string{"wsu_agent_args": `--sim-root "a b"`}, "cannot pass unquoted"},
		{"host key", map[string]string{"ssh_host_key": "AAAA"}, "ssh_host_key is not a public key in authorized_keys format"},
		{"jump", map[string]string{"proxy_jump": "a@b:x"}, "proxy_jump"},
		{"two jumps", map[string]string{"proxy_jump": "a,b"}, "only one jump host"},
		{"inline key garbage", map[string]string{"ssh_private_key": "not-a-key-SECRETMATERIAL"}, "ssh_private_key is not a private key (OpenSSH or PEM)"},
		{"inline key and file", map[string]string{"ssh_private_key": testPrivateKey, "private_key_file": "/k"}, "ssh_private_key and a private key file (/k) are both set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := map[string]string{"wsu_remote_os": "linux", "wsu_agent_binary": "/bin/true"}
			for k, v := range tt.vars {
				if v == "" {
					delete(kv, k)
				} else {
					kv[k] = v
				}
			}
			_, err := ParseConfig("win01", vars(kv))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.True(t, strings.HasPrefix(err.Error(), "host win01: "), err.Error())
			assert.NotContains(t, err.Error(), "SECRETMATERIAL", "errors never quote a key")
			assert.NotContains(t, err.Error(), "PRIVATE KEY-----", "errors never quote a key")
		})
	}
}

func TestParseJump(t *testing.T) {
	tests := []struct {
		in   string
		want JumpHost
		err  bool
	}{
		{"bastion", JumpHost{"me", "bastion", 22}, false},
		{"ops@bastion", JumpHost{"ops", "bastion", 22}, false},
		{"ops@bastion:2222", JumpHost{"ops", "bastion", 2222}, false},
		{"ssh://ops@10.0.0.1:2222", JumpHost{"ops", "10.0.0.1", 2222}, false},
		{"ops@[fd00::1]:2222", JumpHost{"ops", "fd00::1", 2222}, false},
		{"@bastion", JumpHost{}, true},
		{"ops@bastion:0", JumpHost{}, true},
		{"ops@", JumpHost{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseJump(tt.in, "me")
			if tt.err {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, *got)
		})
	}
}

func TestSFTPPath(t *testing.T) {
	tests := []struct{ os, in, want string }{
		{"windows", `C:\k\wsu\wsu-1.0.exe`, "/C:/k/wsu/wsu-1.0.exe"},
		{"windows", `d:\x`, "/d:/x"},
		{"windows", `C:/k/x.exe`, "/C:/k/x.exe"},
		{"linux", "/opt/wsu/wsu", "/opt/wsu/wsu"},
		{"linux", ".wsu/wsu-1", ".wsu/wsu-1"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, sftpPath(tt.os, tt.in), tt.in)
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want errKind
	}{
		{"refused", &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}, transient},
		{"reset in handshake", fmt.Errorf("ssh: handshake failed: %w", syscall.ECONNRESET), transient},
		{"eof in handshake", fmt.Errorf("ssh: handshake failed: %w", io.EOF), transient},
		{"handshake timeout", errHandshakeTimeout, transient},
		{"auth", errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey], no supported methods remain"), authFail},
		{"host key", fmt.Errorf("ssh: handshake failed: %w", &HostKeyError{msg: "x"}), fatal},
		{"jump cannot reach target", &gossh.OpenChannelError{Reason: gossh.ConnectionFailed}, transient},
		{"jump forbids forwarding", &gossh.OpenChannelError{Reason: gossh.Prohibited}, fatal},
		{"no common algorithm", errors.New("ssh: handshake failed: ssh: no common algorithm for key exchange"), fatal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, classify(tt.err))
		})
	}
}

func TestConnectErrorFoldsRepeats(t *testing.T) {
	refused := errors.New("dial tcp 10.0.0.5:22: connect: connection refused")
	e := &ConnectError{Name: "win01", Addr: "admin@10.0.0.5:22", Why: "gave up after 5m0s (connect_retry_window = 5m0s)", Attempts: []attempt{
		{0, refused}, {time.Second, refused}, {3 * time.Second, refused},
		{7 * time.Second, errors.New("ssh: handshake failed: EOF")},
	}}
	want := `ssh: cannot connect to win01 (admin@10.0.0.5:22): ssh: handshake failed: EOF
gave up after 5m0s (connect_retry_window = 5m0s); 4 attempts:
  attempts 1-3 at +0s..+3s: dial tcp 10.0.0.5:22: connect: connection refused
  attempt 4 at +7s: ssh: handshake failed: EOF`
	assert.Equal(t, want, e.Error())
}

// Without wsu_agent_binary the run's build for the host's platform is
// deployed; a missing one fails before any connection, saying how to get
// it.
func TestDialAgentBuild(t *testing.T) {
	ctx := context.Background()
	kv := vars(map[string]string{"wsu_remote_os": "windows", "ansible_port": "1"})
	_, err := Dialer{Agents: agentbin.New(agentbin.Options{Dir: t.TempDir()})}.Dial(ctx, "win01", kv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ssh: host win01: this wsu carries no agent for windows/amd64")
	assert.Contains(t, err.Error(), "make build")

	_, err = Dial(ctx, "win01", kv)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set wsu_agent_binary", "no Source: the file must be named")

	cfg, err := ParseConfig("win01", kv)
	require.NoError(t, err)
	assert.Empty(t, cfg.AgentBinary, "the default build is the Dialer's, not the config's")
	_, err = Connect(ctx, cfg)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no agent binary to deploy")
}
