package ssh

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/inventory"
	"github.com/wsu-project/wsu/modules/generic"
)

// TestKeyCheckVarsLeaveOnlyTheKey pins ssh_key_check's contract with this
// transport: whatever the host's inventory says about credentials, the
// second connection offers only the key being checked, over SSH, and gives
// up on the first refusal.
func TestKeyCheckVarsLeaveOnlyTheKey(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := gossh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	key := string(pem.EncodeToMemory(block))
	str := func(s string) inventory.Var { return inventory.Var{Value: cty.StringVal(s)} }
	vars := map[string]inventory.Var{
		"ansible_host": str("10.0.0.1"), "ansible_user": str("Administrator"),
		"ansible_connection": str("winrm"), "ansible_ssh_private_key_file": str("/keys/old"),
		"private_key_file": str("/keys/old2"), "ansible_private_key_file": str("/keys/old3"),
		"ansible_password": str("pw"), "password": str("pw"), "ansible_ssh_pass": str("pw"), "ansible_ssh_password": str("pw"),
	}
	for k, v := range generic.SSHKeyCheckVars(key) {
		if v.IsNull() {
			delete(vars, k)
		} else {
			vars[k] = inventory.Var{Value: v}
		}
	}
	cfg, err := ParseConfig("win-01", vars)
	require.NoError(t, err)
	assert.Equal(t, strings.TrimSpace(key), strings.TrimSpace(cfg.PrivateKey))
	assert.Empty(t, cfg.PrivateKeyFile)
	assert.Empty(t, cfg.Password)
	assert.Zero(t, cfg.AuthRetryWindow)
	assert.Equal(t, "10.0.0.1", cfg.Host, "the address and user stay the inventory's")
	assert.Equal(t, "Administrator", cfg.User)
	assert.Equal(t, "ssh", vars["connection"].Value.AsString())
	assert.NotContains(t, vars, "ansible_connection")
}
