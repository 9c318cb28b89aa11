package payload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// payloadDir writes files and a manifest for them.
func payloadDir(t *testing.T, files map[string][]byte, source func(name string) string) (string, *Manifest) {
	t.Helper()
	dir := t.TempDir()
	m := &Manifest{Version: "1.0.0"}
	for _, name := range []string{"kubelet.exe", "kube-proxy.exe"} {
		content := files[name]
		c := Component{Name: name[:len(name)-4], File: name, Version: "v1.31.0", SHA256: sum(content), Destination: `C:\k\` + name, Service: name[:len(name)-4]}
		if source != nil {
			c.Source = source(name)
		}
		m.Components = append(m.Components, c)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), content, 0o644))
	}
	data, _ := json.Marshal(m)
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644))
	return dir, m
}

var files = map[string][]byte{"kubelet.exe": []byte("kubelet stand-in"), "kube-proxy.exe": []byte("kube-proxy stand-in")}

func TestVerify(t *testing.T) {
	dir, _ := payloadDir(t, files, nil)
	m, err := Load(dir)
	require.NoError(t, err)
	problems, err := Verify(dir, m)
	require.NoError(t, err)
	assert.Empty(t, problems)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "kubelet.exe"), []byte("tampered"), 0o644))
	require.NoError(t, os.Remove(filepath.Join(dir, "kube-proxy.exe")))
	problems, err = Verify(dir, m)
	require.NoError(t, err)
	require.Len(t, problems, 2)
	assert.Contains(t, problems[0].String(), "kubelet: sha256 ")
	assert.Equal(t, "kube-proxy: missing kube-proxy.exe", problems[1].String())
}

func TestCheck(t *testing.T) {
	good := Component{Name: "kubelet", File: "kubelet.exe", SHA256: sum(nil), Destination: `C:\k\kubelet.exe`}
	cases := []struct {
		name string
		mut  func(m *Manifest)
		want string
	}{
		{"no version", func(m *Manifest) { m.Version = "" }, "version is empty"},
		{"bad sha", func(m *Manifest) { m.Components[0].SHA256 = "abc" }, "not 64 lower-case hex"},
		{"relative destination", func(m *Manifest) { m.Components[0].Destination = `k\kubelet.exe` }, "absolute Windows path"},
		{"path in file", func(m *Manifest) { m.Components[0].File = "../kubelet.exe" }, "plain file name"},
		{"duplicate", func(m *Manifest) { m.Components = append(m.Components, m.Components[0]) }, "duplicate name"},
		{"no components", func(m *Manifest) { m.Components = nil }, "no components"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manifest{Version: "1", Components: []Component{good}}
			tc.mut(m)
			err := m.Check()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	assert.NoError(t, (&Manifest{Version: "1", Components: []Component{good}}).Check())
}

func TestFetch(t *testing.T) {
	corrupt := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := filepath.Base(r.URL.Path)
		content, ok := files[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if corrupt {
			content = []byte("corrupted in transit")
		}
		_, _ = w.Write(content)
	}))
	defer srv.Close()
	dir, m := payloadDir(t, files, func(name string) string { return srv.URL + "/" + name })
	require.NoError(t, os.Remove(filepath.Join(dir, "kubelet.exe")))

	// A corrupt download is refused and leaves nothing behind.
	corrupt = true
	err := Fetch(context.Background(), srv.Client(), dir, m, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not match the manifest")
	_, statErr := os.Stat(filepath.Join(dir, "kubelet.exe"))
	assert.True(t, os.IsNotExist(statErr))
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".fetch-*"))
	assert.Empty(t, leftovers)

	corrupt = false
	var seen []string
	require.NoError(t, Fetch(context.Background(), srv.Client(), dir, m, func(c string, done, total int64) { seen = append(seen, c) }))
	assert.Equal(t, []string{"kubelet"}, seen, "only the missing component is fetched")
	problems, err := Verify(dir, m)
	require.NoError(t, err)
	assert.Empty(t, problems)

	m.Components[0].Source = srv.URL + "/nope.exe"
	require.NoError(t, os.Remove(filepath.Join(dir, "kubelet.exe")))
	err = Fetch(context.Background(), srv.Client(), dir, m, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "404")
}

func TestCopy(t *testing.T) {
	files := map[string][]byte{"kubelet.exe": []byte("kubelet"), "kube-proxy.exe": []byte("proxy")}
	src, m := payloadDir(t, files, nil)
	require.NoError(t, os.WriteFile(filepath.Join(src, "stray.txt"), []byte("not listed"), 0o644))

	dst := filepath.Join(t.TempDir(), "payload")
	require.NoError(t, Copy(src, dst, m))
	got, err := Load(dst)
	require.NoError(t, err)
	problems, err := Verify(dst, got)
	require.NoError(t, err)
	assert.Empty(t, problems)
	assert.NoFileExists(t, filepath.Join(dst, "stray.txt"), "only what the manifest lists")

	// A tampered source file is not copied, and without a complete copy
	// there is no manifest: the destination never looks whole.
	require.NoError(t, os.WriteFile(filepath.Join(src, "kubelet.exe"), []byte("tampered"), 0o644))
	dst2 := filepath.Join(t.TempDir(), "payload")
	err = Copy(src, dst2, m)
	require.ErrorContains(t, err, "kubelet: sha256")
	assert.NoFileExists(t, filepath.Join(dst2, "kubelet.exe"))
	assert.NoFileExists(t, filepath.Join(dst2, ManifestFile))
	entries, err := os.ReadDir(dst2)
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), ".copy-", "temporary files are removed")
	}
}

// TestManifestDocumented: docs/payload.md documents every manifest key and
// its example is a manifest Load accepts.
func TestManifestDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/payload.md")
	require.NoError(t, err)
	text := string(doc)
	for _, v := range []any{Manifest{}, Component{}} {
		ty := reflect.TypeOf(v)
		for i := range ty.NumField() {
			tag, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
			assert.Contains(t, text, "| `"+tag+"` |", "docs/payload.md documents %s.%s", ty.Name(), ty.Field(i).Name)
		}
	}
	_, rest, ok := strings.Cut(text, "```json\n")
	require.True(t, ok, "docs/payload.md has a JSON example")
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), []byte(example), 0o644))
	m, err := Load(dir)
	require.NoError(t, err, "the example is a valid manifest")
	assert.Len(t, m.Components, 2)
}
