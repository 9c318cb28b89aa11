package userdata

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
)

func newKey(t *testing.T) (ssh.PublicKey, []byte) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKey(priv, "it's a comment")
	require.NoError(t, err)
	sp, err := ssh.NewPublicKey(pub)
	require.NoError(t, err)
	return sp, pem.EncodeToMemory(block)
}

// The script authorises exactly the key, in a single-quoted string no key
// text can end, and does the three things its comment says.
func TestScriptAuthorisesTheKey(t *testing.T) {
	pub, _ := newKey(t)
	s := Script(pub)
	assert.True(t, strings.HasPrefix(s, "<powershell>\n"))
	assert.True(t, strings.HasSuffix(s, "</powershell>\n<persist>true</persist>\n"), "runs at every boot")

	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "Set-Content -Path $keys -Value '") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "one authorized_keys write")
	value := strings.TrimSuffix(strings.TrimPrefix(lines[0], "Set-Content -Path $keys -Value '"), "' -Encoding ascii")
	assert.NotContains(t, value, "'")
	got, comment, _, rest, err := ssh.ParseAuthorizedKey([]byte(value))
	require.NoError(t, err)
	assert.Equal(t, pub.Marshal(), got.Marshal(), "the key itself")
	assert.Empty(t, comment, "no comment: nothing user-written in the script")
	assert.Empty(t, rest)
	assert.Contains(t, s, ssh.FingerprintSHA256(pub), "the fingerprint, for a reader to compare")

	for _, want := range []string{
		"Add-WindowsCapability -Online -Name $capability.Name", "Set-Service -Name sshd -StartupType Automatic",
		`'ssh\administrators_authorized_keys'`, "/inheritance:r /grant '*S-1-5-32-544:F' /grant '*S-1-5-18:F'",
		"-Direction Inbound -Protocol TCP -Action Allow -LocalPort 22", "Restart-Service sshd",
	} {
		assert.Contains(t, s, want)
	}
	assert.Equal(t, s, Script(pub), "the same key gives the same bytes (the Secret changes only with the key)")
}

func TestPublicKeyFromEitherHalf(t *testing.T) {
	pub, priv := newKey(t)
	fromPriv, err := PublicKey(priv)
	require.NoError(t, err)
	assert.Equal(t, pub.Marshal(), fromPriv.Marshal())
	fromPub, err := PublicKey(ssh.MarshalAuthorizedKey(pub))
	require.NoError(t, err)
	assert.Equal(t, pub.Marshal(), fromPub.Marshal())

	_, raw, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := ssh.MarshalPrivateKeyWithPassphrase(raw, "", []byte("pass"))
	require.NoError(t, err)
	_, err = PublicKey(pem.EncodeToMemory(block))
	assert.ErrorIs(t, err, ErrEncryptedKey)

	_, err = PublicKey([]byte("not a key"))
	assert.ErrorContains(t, err, "neither a public key")
}
