package sim

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestFileACL(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	const file = `C:\ProgramData\ssh\administrators_authorized_keys`
	require.NoError(t, h.MkdirAll(ctx, `C:\ProgramData\ssh`, 0o755))
	require.NoError(t, h.WriteFile(ctx, file, strings.NewReader("key\n"), 0o644))

	got, err := h.FileACL(ctx, file)
	require.NoError(t, err)
	assert.Equal(t, inheritedACL(), got, "a new file inherits its directory's entries")
	want := host.AdminsOnlyACL()
	assert.False(t, got.Satisfies(want))

	require.NoError(t, h.SetFileACL(ctx, file, want))
	got, err = h.FileACL(ctx, `c:\programdata\SSH\administrators_authorized_keys`)
	require.NoError(t, err)
	assert.True(t, got.Satisfies(want), "got %s", got)
	assert.Equal(t, want, got)

	// Unprotected: the parent's entries come back after the explicit ones.
	users := host.ACL{Entries: []host.ACE{{SID: host.SIDUsers, Mask: host.FileFullControl}}}
	require.NoError(t, h.SetFileACL(ctx, file, users))
	got, err = h.FileACL(ctx, file)
	require.NoError(t, err)
	assert.Equal(t, host.SIDAdministrators, got.Owner, "an empty owner leaves it as it was")
	assert.Len(t, got.Entries, 4)
	assert.True(t, got.Satisfies(users))

	require.NoError(t, h.SetFileACL(ctx, file, want))
	// A write renames a new file over the path: it inherits again, as on
	// Windows, so a module must set the ACL after every write.
	require.NoError(t, h.WriteFile(ctx, file, strings.NewReader("key2\n"), 0o644))
	got, err = h.FileACL(ctx, file)
	require.NoError(t, err)
	assert.Equal(t, inheritedACL(), got)

	_, err = h.FileACL(ctx, `C:\ProgramData\ssh\missing`)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.ErrorIs(t, h.SetFileACL(ctx, `C:\ProgramData\ssh\missing`, want), fs.ErrNotExist)
	assert.ErrorContains(t, h.SetFileACL(ctx, file, host.ACL{Entries: []host.ACE{{SID: host.SIDUsers, Mask: 1, Inherited: true}}}), "inherited")
}
