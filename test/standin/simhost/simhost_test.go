package simhost

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/agent/platform/sim"
)

func TestPaths(t *testing.T) {
	for p, want := range map[string]bool{
		`C:\k\kubelet.exe`: true, `c:/var/log`: true, `\\?\C:\k`: true, `/C:/k/x`: true,
		`/usr/bin/x`: false, `kubelet`: false, `1:\x`: false, ``: false,
	} {
		assert.Equal(t, want, IsWindows(p), p)
	}

	t.Setenv(sim.EnvRoot, "")
	s, err := Open()
	require.NoError(t, err)
	got, err := s.Local("/tmp/x.log")
	require.NoError(t, err)
	assert.Equal(t, "/tmp/x.log", got)
	_, err = s.Local(`C:\k\kubeconfig`)
	assert.ErrorContains(t, err, sim.EnvRoot)

	root := t.TempDir()
	t.Setenv(sim.EnvRoot, filepath.Join(root, "absent"))
	_, err = Open()
	assert.ErrorContains(t, err, "holds no simulated host")

	_, err = sim.New(root, sim.Options{})
	require.NoError(t, err)
	t.Setenv(sim.EnvRoot, root)
	s, err = Open()
	require.NoError(t, err)
	got, err = s.Local(`c:\var\lib\kubelet\pki\`)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "fs", "C", "var", "lib", "kubelet", "pki"), got)
}
