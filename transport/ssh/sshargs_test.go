package ssh

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAnsibleSSHArgs: the jump host forms Ansible inventories write in
// ansible_ssh_common_args / ansible_ssh_extra_args become wsu's jump host;
// options that would route the connection elsewhere are errors naming the
// variable and its place; anything else is a warning naming the option.
func TestAnsibleSSHArgs(t *testing.T) {
	me := currentUser()
	tests := []struct {
		name string
		vars map[string]string
		jump *JumpHost // nil: no jump host
		err  string    // expected error text
		warn []string  // expected in the warnings (all in order, joined)
	}{
		{name: "-o ProxyJump=", vars: map[string]string{"ansible_ssh_common_args": "-o ProxyJump=ops@bastion:2222"}, jump: &JumpHost{"ops", "bastion", 2222}},
		{name: "-o ProxyJump with a space", vars: map[string]string{"ansible_ssh_common_args": "-o 'ProxyJump ops@bastion'"}, jump: &JumpHost{"ops", "bastion", 22}},
		{name: "-oProxyJump glued, key in any case", vars: map[string]string{"ansible_ssh_common_args": "-oproxyjump=bastion"}, jump: &JumpHost{me, "bastion", 22}},
		{name: "-J", vars: map[string]string{"ansible_ssh_extra_args": "-J ops@10.0.0.1:22"}, jump: &JumpHost{"ops", "10.0.0.1", 22}},
		{name: "-J glued", vars: map[string]string{"ansible_ssh_extra_args": "-Jbastion"}, jump: &JumpHost{me, "bastion", 22}},
		{name: "-J among harmless flags", vars: map[string]string{"ansible_ssh_common_args": "-qJ ops@bastion"}, jump: &JumpHost{"ops", "bastion", 22}, warn: []string{"wsu ignores -q"}},
		{name: "ProxyCommand ssh -W, Ansible's FAQ form",
			vars: map[string]string{"ansible_ssh_common_args": `-o ProxyCommand="ssh -W %h:%p -q ops@gateway.example.com"`},
			jump: &JumpHost{"ops", "gateway.example.com", 22}},
		{name: "ProxyCommand with -p and -l",
			vars: map[string]string{"ansible_ssh_common_args": `-o 'ProxyCommand=ssh -p 2222 -l ops -W [%h]:%p bastion'`},
			jump: &JumpHost{"ops", "bastion", 2222}},
		{name: "proxy_jump wins", vars: map[string]string{"proxy_jump": "a@one", "ansible_ssh_common_args": "-J b@two"}, jump: &JumpHost{"a", "one", 22}},
		{name: "first value wins, common before extra", vars: map[string]string{"ansible_ssh_common_args": "-o ProxyJump=a@one", "ansible_ssh_extra_args": "-J b@two"}, jump: &JumpHost{"a", "one", 22}},
		{name: "ProxyJump=none", vars: map[string]string{"ansible_ssh_common_args": "-o ProxyJump=none -J b@two"}},
		{name: "ignored options warn, with the wsu variable",
			vars: map[string]string{"ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -C -o ServerAliveInterval=30"},
			warn: []string{"inventory.ini:3:10: ansible_ssh_common_args: wsu ignores -o StrictHostKeyChecking=no (host keys are always verified; use ssh_trust_on_first_use=true",
				"-o UserKnownHostsFile=/dev/null (use ssh_known_hosts_file)", "-C, -o ServerAliveInterval=30 (use keepalive_interval)"}},
		{name: "both variables warn separately",
			vars: map[string]string{"ansible_ssh_common_args": "-o ControlMaster=auto", "ansible_ssh_extra_args": "-i /k"},
			warn: []string{"ansible_ssh_common_args: wsu ignores -o ControlMaster=auto:", "ansible_ssh_extra_args: wsu ignores -i /k (use ansible_ssh_private_key_file)"}},
		{name: "untranslatable ProxyCommand is an error", vars: map[string]string{"ansible_ssh_common_args": `-o ProxyCommand="nc -X connect -x proxy:3128 %h %p"`},
			err: `inventory.ini:3:10: ansible_ssh_common_args -o ProxyCommand="nc -X connect -x proxy:3128 %h %p": it does not run ssh; wsu translates only "ssh -W %h:%p`},
		{name: "ProxyCommand with ssh options is an error", vars: map[string]string{"ansible_ssh_common_args": `-o ProxyCommand="ssh -o StrictHostKeyChecking=no -W %h:%p bastion"`},
			err: "it passes -o, which wsu cannot carry over to the jump host"},
		{name: "ProxyCommand without -W is an error", vars: map[string]string{"ansible_ssh_extra_args": `-o ProxyCommand="ssh bastion nc %h %p"`},
			err: "ansible_ssh_extra_args -o ProxyCommand"},
		{name: "untranslatable ProxyCommand under proxy_jump warns", vars: map[string]string{"proxy_jump": "a@one", "ansible_ssh_common_args": `-o ProxyCommand="nc %h %p"`},
			jump: &JumpHost{"a", "one", 22}, warn: []string{"wsu ignores -o ProxyCommand (proxy_jump is set and wins)"}},
		{name: "-p is an error", vars: map[string]string{"ansible_ssh_common_args": "-p 2222"}, err: "ansible_ssh_common_args -p 2222 would change where or as whom wsu connects, which wsu does not take from ssh arguments: set ansible_port instead"},
		{name: "-o User is an error", vars: map[string]string{"ansible_ssh_extra_args": "-o User=admin"}, err: "ansible_ssh_extra_args -o User=admin would change where or as whom wsu connects"},
		{name: "-F is an error", vars: map[string]string{"ansible_ssh_common_args": "-F ~/.ssh/bastion.cfg"}, err: "wsu does not read ssh_config files"},
		{name: "a host argument is an error", vars: map[string]string{"ansible_ssh_common_args": "-q bastion"}, err: `"bastion" is not an option`},
		{name: "unknown flag", vars: map[string]string{"ansible_ssh_common_args": "-Z"}, err: "-Z is not an ssh option"},
		{name: "missing argument", vars: map[string]string{"ansible_ssh_common_args": "-J"}, err: "-J needs an argument"},
		{name: "open quote", vars: map[string]string{"ansible_ssh_common_args": `-o ProxyCommand="ssh -W %h:%p bastion`}, err: `a " quote is not closed`},
		{name: "two jump hosts", vars: map[string]string{"ansible_ssh_common_args": "-J a@one,b@two"}, err: "ansible_ssh_common_args jump host: \"a@one,b@two\": only one jump host is supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kv := map[string]string{"wsu_remote_os": "linux", "wsu_agent_binary": "/bin/true"}
			for k, v := range tt.vars {
				kv[k] = v
			}
			c, err := ParseConfig("win01", vars(kv))
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			if tt.jump == nil {
				assert.Nil(t, c.ProxyJump)
			} else if assert.NotNil(t, c.ProxyJump) {
				assert.Equal(t, *tt.jump, *c.ProxyJump)
			}
			warnings := strings.Join(c.Warnings, "\n")
			if len(tt.warn) == 0 {
				assert.Empty(t, c.Warnings)
			}
			rest := warnings
			for _, w := range tt.warn {
				i := strings.Index(rest, w)
				if !assert.GreaterOrEqual(t, i, 0, "warnings %q lack %q (in order)", warnings, w) {
					break
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

func TestShellSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{`-o ProxyCommand="ssh -W %h:%p -q user@bastion"`, []string{"-o", "ProxyCommand=ssh -W %h:%p -q user@bastion"}},
		{`-o 'ProxyJump a b'  -J\ x`, []string{"-o", "ProxyJump a b", "-J x"}},
		{`"a\"b" 'c\d' e\\f ""`, []string{`a"b`, `c\d`, `e\f`, ""}},
		{"  ", nil},
	}
	for _, tt := range tests {
		got, err := shellSplit(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
	}
	_, err := shellSplit(`'open`)
	assert.Error(t, err)
}
