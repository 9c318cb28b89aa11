package main

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/wsu-project/wsu/userdata"
)

// TestUserData: `wsu user-data KEY` prints the first-boot script for the
// key's public half, from the private key or the .pub file, and --secret
// the Secret a MachineSet references.
func TestUserData(t *testing.T) {
	dir := t.TempDir()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "")
	require.NoError(t, err)
	keyFile := filepath.Join(dir, "id_ed25519")
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600))
	sp, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(keyFile+".pub", ssh.MarshalAuthorizedKey(sp), 0o644))
	want := userdata.Script(sp)

	for _, f := range []string{keyFile, keyFile + ".pub"} {
		code, out, errs := wsu(t, nil, "user-data", f)
		require.Equal(t, 0, code, errs)
		assert.Equal(t, want, out, f)
	}

	code, out, errs := wsu(t, nil, "user-data", "--secret", keyFile)
	require.Equal(t, 0, code, errs)
	var s corev1.Secret
	require.NoError(t, yaml.UnmarshalStrict([]byte(out), &s))
	assert.Equal(t, "Secret", s.Kind)
	assert.Equal(t, "windows-user-data", s.Name)
	assert.Equal(t, "openshift-machine-api", s.Namespace)
	assert.Equal(t, want, s.StringData["userData"])
	_, out, _ = wsu(t, nil, "user-data", "--secret", "-n", "capz-system", keyFile)
	require.NoError(t, yaml.Unmarshal([]byte(out), &s))
	assert.Equal(t, "capz-system", s.Namespace)

	block, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("pw"))
	require.NoError(t, err)
	locked := filepath.Join(dir, "locked")
	require.NoError(t, os.WriteFile(locked, pem.EncodeToMemory(block), 0o600))
	code, out, errs = wsu(t, nil, "user-data", locked)
	assert.Equal(t, 1, code)
	assert.Empty(t, out, "nothing printed but the error")
	assert.Contains(t, errs, locked+": the private key is protected by a passphrase: give its public key (the .pub file) instead")
}
