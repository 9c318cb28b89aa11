package standin

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuild(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	got, err := Build(ctx, dir, "", "logrunner")
	require.NoError(t, err)
	b, err := os.ReadFile(got["logrunner"])
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("\x7fELF")), "a Linux binary by default")

	got, err = Build(ctx, dir, "windows", "winsvc")
	require.NoError(t, err)
	assert.Regexp(t, `winsvc\.exe$`, got["winsvc"])
	b, err = os.ReadFile(got["winsvc"])
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(b, []byte("MZ")), "a Windows binary")

	_, err = Build(ctx, dir, "", "../kube")
	assert.ErrorContains(t, err, "not a stand-in name")
	_, err = Build(ctx, dir, "", "absent")
	assert.ErrorContains(t, err, "go build absent")
	_, err = Build(ctx, dir, "")
	assert.Error(t, err)
}
