//go:build !windows

package windows_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

// TestWineFileACL: the ACL the SSH key file gets, under Wine's real
// advapi32. Wine implements GetNamedSecurityInfo and SetNamedSecurityInfo
// on files but keeps no descriptor (it derives one from the Unix mode), so
// the file half checks the calls and their errors, and the conversion
// between host.ACL and Win32's SIDs, DACL and control bits is checked
// through DescriptorRoundTrip, which builds and reads an in-memory
// descriptor with the same code SetFileACL and FileACL use.
func TestWineFileACL(t *testing.T) {
	t.Parallel()
	pr := newProbe(t)
	dir := `C:\ProgramData\ssh`
	file := dir + `\administrators_authorized_keys`
	want := host.AdminsOnlyACL()
	mixed := host.ACL{Entries: []host.ACE{
		{SID: host.SIDUsers, Mask: host.FileReadExecute},
		{SID: host.SIDAuthenticatedUsers, Mask: 0x00010000, Deny: true}, // DELETE
	}}
	rs := pr.run(
		step{"mkdir", a{"path": dir}},
		step{"write", a{"path": file, "content": []byte("ssh-ed25519 AAAA test\n"), "mode": 0o644}},
		step{"acl-get", a{"path": file}},
		step{"acl-set", a{"path": file, "acl": want}},
		step{"acl-roundtrip", a{"acl": want}},
		step{"acl-roundtrip", a{"acl": mixed}},
		step{"acl-get", a{"path": dir + `\missing`}},
		step{"acl-set", a{"path": dir + `\missing`, "acl": want}},
		step{"acl-set", a{"path": file, "acl": host.ACL{Entries: []host.ACE{{SID: "Everyone", Mask: 1}}}}},
	)
	for i := range 6 {
		require.Empty(t, rs[i].Error, "step %d", i)
	}
	read := value[host.ACL](t, rs[2])
	t.Logf("ACL Wine reports for a file: %s", read)
	assert.NotEmpty(t, read.Owner, "an owner SID is read")
	assert.NotEmpty(t, read.Entries, "entries are read")
	for _, e := range read.Entries {
		assert.Regexp(t, `^S-1-`, e.SID)
	}

	got := value[host.ACL](t, rs[4])
	assert.True(t, got.Satisfies(want), "round trip: got %s, want %s", got, want)
	assert.Equal(t, host.SIDAdministrators, got.Owner)
	assert.True(t, got.Protected)
	gotMixed := value[host.ACL](t, rs[5])
	assert.True(t, gotMixed.Satisfies(mixed), "round trip: got %s, want %s", gotMixed, mixed)
	assert.False(t, gotMixed.Protected)

	assert.True(t, rs[6].NotExist, "get on a missing file is fs.ErrNotExist: %s", rs[6].Error)
	assert.True(t, rs[7].NotExist, "set on a missing file is fs.ErrNotExist: %s", rs[7].Error)
	assert.Contains(t, rs[8].Error, "not a SID", "an invalid ACL is refused before any call")
}
