package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSecretName(t *testing.T) {
	for _, n := range []string{"ansible_password", "ANSIBLE_BECOME_PASSWORD", "ansible_ssh_pass", "ssh_private_key",
		"join_token", "access_key", "api_key", "registry_apikey", "client_secret", "passphrase", "azure_credentials"} {
		assert.True(t, SecretName(n), n)
	}
	for _, n := range []string{"ansible_user", "ansible_host", "ansible_ssh_private_key_file", "ssh_host_key",
		"node_public_key", "ssh_pub_key", "zone", "keyboard_layout"} {
		assert.False(t, SecretName(n), n)
	}
}
