package controller

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/intstr"

	wsuv1 "github.com/wsu-project/wsu/api/v1alpha1"
	"github.com/wsu-project/wsu/payload"
)

func TestMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		flag  string
		total int
		want  int
	}{
		{"1", 10, 1},
		{"3", 2, 3},
		{"25%", 8, 2},
		{"25%", 7, 1}, // rounds down
		{"10%", 3, 1}, // at least one
		{"0", 5, 1},
		{"100%", 4, 4},
	} {
		v, err := ParseMaxUnavailable(tc.flag)
		require.NoError(t, err, tc.flag)
		got, err := scaledMaxUnavailable(v, tc.total)
		require.NoError(t, err, tc.flag)
		assert.Equal(t, tc.want, got, "%s of %d", tc.flag, tc.total)
	}
	for _, bad := range []string{"abc", "-1", "5%%", "x%"} {
		_, err := ParseMaxUnavailable(bad)
		assert.Error(t, err, bad)
	}
	o := Options{StateDir: t.TempDir(), MaxUnavailable: intstr.FromString("half")}
	o.defaults()
	assert.Error(t, o.check(), "Setup refuses a max unavailable that is neither a number nor a percentage")
}

func TestRolloutLimit(t *testing.T) {
	var l rolloutLimit
	require.True(t, l.acquire(2))
	require.True(t, l.acquire(2))
	assert.False(t, l.acquire(2), "both slots taken")
	assert.True(t, l.acquire(3), "a larger bound (more instances) has room")
	l.release()
	l.release()
	assert.Equal(t, 1, l.taken())
	assert.False(t, l.acquire(1))
	assert.False(t, l.acquire(0), "no slot when failed upgrades use the whole budget")
}

func TestControllerPayloadDir(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "a.wsuvars")
	second := filepath.Join(dir, "b.wsuvars")
	none := filepath.Join(dir, "c.wsuvars")
	bad := filepath.Join(dir, "d.wsuvars")
	write(t, first, "payload_dir = \"/srv/one\"\ncluster_flavour = \"kubeadm\"\n")
	write(t, second, "payload_dir = \"/srv/two\"\n")
	write(t, none, "cluster_flavour = \"openshift\"\n")
	write(t, bad, "payload_dir = 42\n")

	got, err := controllerPayloadDir([]string{first, second, none}, nil)
	require.NoError(t, err)
	assert.Equal(t, "/srv/two", got, "the last var file that sets it")
	got, err = controllerPayloadDir([]string{first}, []string{"payload_dir=/srv/cli", "node_name=x"})
	require.NoError(t, err)
	assert.Equal(t, "/srv/cli", got, "a -var wins over var files")
	got, err = controllerPayloadDir([]string{none}, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	_, err = controllerPayloadDir([]string{bad}, nil)
	assert.ErrorContains(t, err, "not a string")
	_, err = controllerPayloadDir([]string{filepath.Join(dir, "missing")}, nil)
	assert.Error(t, err)
}

func TestPayloadVersions(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	writeManifest(t, dir, "4.18.0")
	writeManifest(t, other, "4.17.2")
	p := &payloadVersions{dir: dir, cache: map[string]manifestStamp{}}
	wi := &wsuv1.WindowsInstance{}
	v, err := p.want(wi)
	require.NoError(t, err)
	assert.Equal(t, "4.18.0", v)

	writeManifest(t, dir, "4.18.10") // a new payload in place
	v, err = p.want(wi)
	require.NoError(t, err)
	assert.Equal(t, "4.18.10", v, "a changed manifest is read again")

	wi.Spec.Vars = map[string]string{"payload_dir": `"` + other + `"`}
	v, err = p.want(wi)
	require.NoError(t, err)
	assert.Equal(t, "4.17.2", v, "the instance's own payload_dir")

	none := &payloadVersions{cache: map[string]manifestStamp{}}
	v, err = none.want(&wsuv1.WindowsInstance{})
	require.NoError(t, err)
	assert.Empty(t, v, "no payload_dir: no version, no upgrades")

	require.NoError(t, os.Remove(filepath.Join(other, payload.ManifestFile)))
	_, err = p.want(wi)
	assert.Error(t, err)
}

func write(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

func writeManifest(t *testing.T, dir, version string) {
	t.Helper()
	m := payload.Manifest{Version: version, Components: []payload.Component{{
		Name: "kubelet", File: "kubelet.exe", Version: "v1.31.0", SHA256: strings.Repeat("ab", 32), Destination: `C:\k\kubelet.exe`,
	}}}
	data, err := json.Marshal(m)
	require.NoError(t, err)
	write(t, filepath.Join(dir, payload.ManifestFile), string(data))
}
