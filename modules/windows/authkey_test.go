package windows

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"
	gossh "golang.org/x/crypto/ssh"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// testKey is a fresh ed25519 public key as an authorized_keys line.
func testKey(t *testing.T, comment string) (string, string) {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	k, err := gossh.NewPublicKey(pub)
	require.NoError(t, err)
	return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))) + " " + comment, gossh.FingerprintSHA256(k)
}

func TestAuthorizedKey(t *testing.T) {
	oldKey, oldFP := testKey(t, "old")
	newKey, newFP := testKey(t, "new")
	otherKey, otherFP := testKey(t, "admin")
	const path = AdminKeysFile
	type step struct {
		name        string
		attrs       map[string]cty.Value
		wantAction  modules.Action
		wantFields  []string
		wantContent string
		wantAfter   []string
	}
	h := newHost(t)
	// An admin's file with CRLF endings, a comment, a key with options.
	writeFile(t, h, path, "# keys\r\n"+oldKey+"\r\nfrom=\"10.0.0.0/8\" "+otherKey+"\r\n")
	steps := []step{
		{name: "add the new key", attrs: map[string]cty.Value{"key": cty.StringVal(newKey)}, wantAction: modules.Update,
			wantFields:  []string{"keys added", "acl"},
			wantContent: "# keys\r\n" + oldKey + "\r\nfrom=\"10.0.0.0/8\" " + otherKey + "\r\n" + newKey + "\r\n",
			wantAfter:   []string{oldFP, otherFP, newFP}},
		{name: "again: nothing to do", attrs: map[string]cty.Value{"key": cty.StringVal(newKey)},
			wantContent: "# keys\r\n" + oldKey + "\r\nfrom=\"10.0.0.0/8\" " + otherKey + "\r\n" + newKey + "\r\n",
			wantAfter:   []string{oldFP, otherFP, newFP}},
		{name: "a comment does not make another key", attrs: map[string]cty.Value{"key": cty.StringVal(strings.TrimSuffix(newKey, "new") + "renamed")},
			wantContent: "# keys\r\n" + oldKey + "\r\nfrom=\"10.0.0.0/8\" " + otherKey + "\r\n" + newKey + "\r\n",
			wantAfter:   []string{oldFP, otherFP, newFP}},
		{name: "remove the old key", attrs: map[string]cty.Value{"key": cty.StringVal(oldKey), "state": cty.StringVal("absent")}, wantAction: modules.Update,
			wantFields:  []string{"keys removed", "acl"},
			wantContent: "# keys\r\nfrom=\"10.0.0.0/8\" " + otherKey + "\r\n" + newKey + "\r\n",
			wantAfter:   []string{otherFP, newFP}},
		{name: "exclusive", attrs: map[string]cty.Value{"key": cty.StringVal(newKey), "exclusive": cty.True}, wantAction: modules.Update,
			wantFields:  []string{"keys removed", "acl"},
			wantContent: "# keys\r\n" + newKey + "\r\n",
			wantAfter:   []string{newFP}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			cfg := cfgFor(t, AuthorizedKey{}, s.attrs)
			pr, _ := converge(t, AuthorizedKey{}, h, cfg)
			assert.Equal(t, s.wantAction, action(pr.Change))
			if pr.Change != nil {
				assert.Equal(t, s.wantFields, fieldNames(pr.Change))
				assert.Equal(t, path, pr.Change.Subject)
			}
			assert.Equal(t, s.wantContent, readFile(t, h, path))
			assert.Equal(t, strs(s.wantAfter...), pr.Result.GetAttr("fingerprints"))
			acl, err := route(t, h).FileACL(ctx, path)
			require.NoError(t, err)
			assert.True(t, acl.Satisfies(host.AdminsOnlyACL()), "the file keeps the ACL sshd wants: %s", acl)
		})
	}
}

func TestAuthorizedKeyCreatesAndRestricts(t *testing.T) {
	key, fp := testKey(t, "new")
	h := newHost(t)
	cfg := cfgFor(t, AuthorizedKey{}, map[string]cty.Value{"key": cty.StringVal(key)})
	pr := plan(t, AuthorizedKey{}, h, cfg)
	require.Equal(t, modules.Create, action(pr.Change))
	assert.Equal(t, cty.NullVal(cty.String), field(t, pr.Change, "acl").Old)
	pr, _ = converge(t, AuthorizedKey{}, h, cfg)
	assert.Equal(t, key+"\n", readFile(t, h, AdminKeysFile), "created with its directory")
	assert.Equal(t, strs(fp), pr.Result.GetAttr("fingerprints"))

	// Someone loosened the ACL: only the ACL changes.
	require.NoError(t, h.SetFileACL(ctx, AdminKeysFile, host.ACL{Entries: []host.ACE{{SID: host.SIDUsers, Mask: host.FileFullControl}}}))
	pr, _ = converge(t, AuthorizedKey{}, h, cfg)
	require.Equal(t, modules.Update, action(pr.Change))
	assert.Equal(t, []string{"acl"}, fieldNames(pr.Change))
	assert.Contains(t, field(t, pr.Change, "acl").Old.AsString(), "allow Users full")
	acl, err := h.FileACL(ctx, AdminKeysFile)
	require.NoError(t, err)
	assert.True(t, acl.Satisfies(host.AdminsOnlyACL()))

	// acl = "keep" leaves a user's file alone.
	const userFile = `C:\Users\admin\.ssh\authorized_keys`
	keep := cfgFor(t, AuthorizedKey{}, map[string]cty.Value{"key": cty.StringVal(key), "path": cty.StringVal(userFile), "acl": cty.StringVal("keep")})
	pr, _ = converge(t, AuthorizedKey{}, h, keep)
	assert.Equal(t, []string{"keys added"}, fieldNames(pr.Change))
	acl, err = h.FileACL(ctx, userFile)
	require.NoError(t, err)
	assert.False(t, acl.Protected)
}

func TestAuthorizedKeyRefusesUTF16(t *testing.T) {
	key, _ := testKey(t, "new")
	h := newHost(t)
	writeFile(t, h, AdminKeysFile, "\xff\xfes\x00s\x00h\x00")
	cfg := cfgFor(t, AuthorizedKey{}, map[string]cty.Value{"key": cty.StringVal(key), "path": cty.StringVal(AdminKeysFile)})
	pr := plan(t, AuthorizedKey{}, h, cfg)
	requireDiag(t, pr.Diagnostics, cfg, hcl.DiagError, "The authorized keys file is UTF-16", "path")
}

func TestAuthorizedKeyValidate(t *testing.T) {
	key, _ := testKey(t, "k")
	runValidate(t, AuthorizedKey{}, []validateCase{
		{name: "valid", attrs: map[string]cty.Value{"key": cty.StringVal(key)}},
		{name: "not a key", attrs: map[string]cty.Value{"key": cty.StringVal("ssh-ed25519 nope")}, wantSummary: "Invalid public key", wantAttr: "key"},
		{name: "a private key", attrs: map[string]cty.Value{"key": cty.StringVal("-----BEGIN OPENSSH PRIVATE KEY-----")}, wantSummary: "Invalid public key", wantAttr: "key"},
		{name: "bad state", attrs: map[string]cty.Value{"key": cty.StringVal(key), "state": cty.StringVal("gone")}, wantSummary: "Invalid state", wantAttr: "state"},
		{name: "relative path", attrs: map[string]cty.Value{"key": cty.StringVal(key), "path": cty.StringVal(`ssh\keys`)}, wantSummary: "Invalid Windows path", wantAttr: "path"},
		{name: "exclusive absent", attrs: map[string]cty.Value{"key": cty.StringVal(key), "state": cty.StringVal("absent"), "exclusive": cty.True}, wantSummary: "exclusive needs state = \"present\"", wantAttr: "exclusive"},
	})
}

// TestAuthorizedKeyKeepsUTF8BOM: a UTF-8 file with a byte order mark (what
// Notepad may save) keeps it, and its first key is read as a key, so it is
// neither duplicated nor lost.
func TestAuthorizedKeyKeepsUTF8BOM(t *testing.T) {
	oldKey, oldFP := testKey(t, "old")
	newKey, newFP := testKey(t, "new")
	h := newHost(t)
	writeFile(t, h, AdminKeysFile, "\xEF\xBB\xBF"+oldKey+"\n")
	cfg := cfgFor(t, AuthorizedKey{}, map[string]cty.Value{"key": cty.StringVal(oldKey + "\n" + newKey), "path": cty.StringVal(AdminKeysFile)})
	converge(t, AuthorizedKey{}, h, cfg)
	got, err := h.ReadFile(ctx, AdminKeysFile, 1<<20)
	require.NoError(t, err)
	assert.Equal(t, "\xEF\xBB\xBF"+oldKey+"\n"+newKey+"\n", string(got))
	pr := plan(t, AuthorizedKey{}, h, cfg)
	assert.Nil(t, pr.Change)
	assert.Equal(t, strs(oldFP, newFP), pr.Result.GetAttr("fingerprints"))
}
