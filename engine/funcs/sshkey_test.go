package funcs

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
)

func TestSSHPublicKey(t *testing.T) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	block, err := gossh.MarshalPrivateKey(priv, "c")
	require.NoError(t, err)
	text := string(pem.EncodeToMemory(block))
	pub, err := gossh.NewPublicKey(priv.Public())
	require.NoError(t, err)
	want := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub)))

	got, err := sshPublicKeyFunc.Call([]cty.Value{cty.StringVal(text).Mark("sensitive")})
	require.NoError(t, err)
	assert.Equal(t, cty.StringVal(want), got, "a public key is not sensitive")

	got, err = sshPublicKeyFunc.Call([]cty.Value{cty.StringVal(want + " a comment")})
	require.NoError(t, err)
	assert.Equal(t, cty.StringVal(want), got, "a public key line comes back without its comment")

	_, err = sshPublicKeyFunc.Call([]cty.Value{cty.StringVal("-----BEGIN OPENSSH PRIVATE KEY-----\nSECRETMATERIAL\n")})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "SECRETMATERIAL")
}
