package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log"
	"maps"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/payload"
)

const repoRoot = "../.."

// TestDockerfileIsRendered keeps the checked-in Dockerfile what Dockerfile
// renders from WSU (make dockerfile rewrites it), and its COPY lines
// exactly WSU's files.
func TestDockerfileIsRendered(t *testing.T) {
	got, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	assert.Equal(t, string(Dockerfile(WSU())), string(got), "the Dockerfile is stale: run make dockerfile")

	copies, err := ParseCopies(got)
	require.NoError(t, err)
	var want []Copy
	for _, f := range WSU().Files {
		want = append(want, Copy(f))
	}
	assert.Equal(t, want, copies)
}

func TestParseCopiesRefusesWhatItCannotRead(t *testing.T) {
	_, err := ParseCopies([]byte("FROM scratch\nCOPY --from=build a /a\n"))
	assert.ErrorContains(t, err, "--from=build")
	_, err = ParseCopies([]byte("COPY a b /dir/\n"))
	assert.ErrorContains(t, err, "one source and one destination")
}

// built is an image built once for the tests of this package.
type built struct {
	context, archive string
	digest           v1.Hash
	meta             Meta
}

// buildOnce stages the context (compiling wsu and its agents: the Go build
// cache makes this a link when make build ran before) and builds the
// archive. The image tests build what they test: nothing is skipped when
// make image has not run.
func buildOnce(t *testing.T, dir string) built {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	repo, err := filepath.Abs(repoRoot)
	require.NoError(t, err)
	b := built{
		context: filepath.Join(dir, "context"),
		archive: filepath.Join(dir, "wsu-image.tar"),
		meta:    Meta{Version: "v9.9.9-test-0123abc", Revision: "0123abc4567890def", Created: time.Unix(1700000000, 0).UTC()},
	}
	require.NoError(t, Stage(ctx, b.context, StageOptions{Repo: repo, Version: b.meta.Version}))
	img, err := Build(b.context, b.meta)
	require.NoError(t, err)
	b.digest, err = WriteArchive(b.archive, img, []string{"localhost/wsu:latest"}, b.meta.Created)
	require.NoError(t, err)
	return b
}

// TestImage is test 6's static half: the archive loads as docker-archive
// (as crane push and podman load read it) and as an OCI layout with one
// digest, holds what the Dockerfile lists, runs as non-root with wsu as its
// entrypoint, its wsu prints the version it was built for, a second build
// gives the same digest, and a registry takes it under that digest.
func TestImage(t *testing.T) {
	b := buildOnce(t, t.TempDir())

	st, err := os.Stat(b.archive)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), st.Mode().Perm(), "an archive others can read")
	img, err := tarball.ImageFromPath(b.archive, nil)
	require.NoError(t, err)
	d, err := img.Digest()
	require.NoError(t, err)
	assert.Equal(t, b.digest, d, "the docker-archive side gives the printed digest")
	assert.Equal(t, b.digest, ociLayoutDigest(t, b.archive), "the OCI layout side gives the printed digest")

	t.Run("config", func(t *testing.T) {
		cf, err := img.ConfigFile()
		require.NoError(t, err)
		assert.Equal(t, "linux", cf.OS)
		assert.Equal(t, "amd64", cf.Architecture)
		assert.Equal(t, "65532:65532", cf.Config.User)
		assert.NotRegexp(t, `^(0|root)(:|$)`, cf.Config.User, "not root")
		assert.Equal(t, []string{"/usr/local/bin/wsu"}, cf.Config.Entrypoint)
		assert.Equal(t, b.meta.Revision, cf.Config.Labels[LabelRevision])
		assert.Equal(t, b.meta.Version, cf.Config.Labels[LabelVersion])
		assert.Equal(t, Source, cf.Config.Labels[LabelSource])
		assert.True(t, cf.Created.Time.Equal(b.meta.Created), "created is the commit time, not the build's: %s", cf.Created)
	})

	files := imageFiles(t, img)
	t.Run("the Dockerfile's files", func(t *testing.T) {
		df, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
		require.NoError(t, err)
		copies, err := ParseCopies(df)
		require.NoError(t, err)
		require.NotEmpty(t, copies)
		for _, c := range copies {
			h, ok := files[tarName(c.Dest)]
			if !assert.True(t, ok, "%s is not in the image", c.Dest) {
				continue
			}
			assert.Equal(t, c.Mode, h.Mode, c.Dest)
			assert.Equal(t, 0, h.Uid, c.Dest)
			assert.True(t, h.ModTime.Equal(b.meta.Created), "%s: %s", c.Dest, h.ModTime)
			src, err := os.ReadFile(filepath.Join(b.context, c.Src))
			require.NoError(t, err)
			assert.Equal(t, int64(len(src)), h.Size, c.Dest)
		}
		passwd := extract(t, img, "etc/passwd")
		assert.Contains(t, string(passwd), "nonroot:x:65532:65532:")
	})

	t.Run("wsu version", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "wsu")
		require.NoError(t, os.WriteFile(bin, extract(t, img, "usr/local/bin/wsu"), 0o755))
		out, err := exec.Command(bin, "version").CombinedOutput()
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "wsu "+b.meta.Version+"\n")
		assert.Contains(t, string(out), "agent windows/amd64: embedded", "the Windows agent it deploys is in it")
		out, err = exec.Command("file", bin).CombinedOutput()
		if err == nil { // file(1) is a convenience here, not a requirement
			assert.Contains(t, string(out), "statically linked")
		}
	})

	t.Run("SBOM lists the modules the image's executables link", func(t *testing.T) { testSBOM(t, b) })

	t.Run("reproducible", func(t *testing.T) {
		again := buildOnce(t, t.TempDir())
		assert.Equal(t, b.digest, again.digest, "the same commit gives the same digest")
		assert.Equal(t, fileSHA(t, b.archive), fileSHA(t, again.archive), "and the same archive bytes")
	})

	t.Run("crane push", func(t *testing.T) {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		ref := strings.TrimPrefix(srv.URL, "http://") + "/wsu:test"
		loaded, err := crane.Load(b.archive)
		require.NoError(t, err)
		require.NoError(t, crane.Push(loaded, ref, crane.Insecure))
		remote, err := crane.Digest(ref, crane.Insecure)
		require.NoError(t, err)
		assert.Equal(t, b.digest.String(), remote, "the registry has the printed digest")
	})

	t.Run("payload image", func(t *testing.T) { testPayloadImage(t, b) })
}

// testPayloadImage layers a payload onto the wsu image, checks it refuses a
// payload that does not match its manifest, and runs the image's
// entrypoint command (from the image's own wsu) as the init container
// would.
func testPayloadImage(t *testing.T, b built) {
	dir := t.TempDir()
	content := map[string]string{"kubelet.exe": "kubelet stand-in", "kube-proxy.exe": "kube-proxy stand-in"}
	m := payload.Manifest{Version: "1.2.3"}
	for f, c := range content {
		sum := sha256.Sum256([]byte(c))
		name := strings.TrimSuffix(f, ".exe")
		m.Components = append(m.Components, payload.Component{Name: name, File: f, Version: "v1.31.0", SHA256: hex.EncodeToString(sum[:]), Destination: `C:\k\` + f})
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), []byte(c), 0o644))
	}
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, payload.ManifestFile), raw, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not in the manifest"), 0o644))

	base, err := Build(b.context, b.meta)
	require.NoError(t, err)
	img, err := BuildPayload(base, dir, b.meta)
	require.NoError(t, err)

	cf, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{WSUPath, "payload", "copy"}, cf.Config.Entrypoint)
	assert.Equal(t, []string{PayloadDir, PayloadTarget}, cf.Config.Cmd)
	assert.Equal(t, "65532:65532", cf.Config.User)
	assert.Equal(t, "1.2.3", cf.Config.Labels[LabelPayloadVersion])
	baseLayers, _ := base.Layers()
	layers, _ := img.Layers()
	require.Len(t, layers, len(baseLayers)+1, "the payload is one layer on the wsu image's")
	bd, _ := baseLayers[0].Digest()
	ld, _ := layers[0].Digest()
	assert.Equal(t, bd, ld, "a registry that has the wsu image stores only the payload layer")

	files := imageFiles(t, img)
	for _, f := range []string{"payload/manifest.json", "payload/kubelet.exe", "payload/kube-proxy.exe"} {
		assert.Contains(t, files, f)
	}
	assert.NotContains(t, files, "payload/notes.txt", "only what the manifest lists")

	// The init container: the image's wsu copies the image's /payload.
	root := t.TempDir()
	for _, f := range []string{"usr/local/bin/wsu", "payload/manifest.json", "payload/kubelet.exe", "payload/kube-proxy.exe"} {
		p := filepath.Join(root, f)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, extract(t, img, f), 0o755))
	}
	target := filepath.Join(root, "emptydir")
	args := append(cf.Config.Entrypoint[1:], filepath.Join(root, "payload"), target)
	out, err := exec.Command(filepath.Join(root, "usr/local/bin/wsu"), args...).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Contains(t, string(out), "payload 1.2.3: 2 components verified and copied")
	got, err := os.ReadFile(filepath.Join(target, "kubelet.exe"))
	require.NoError(t, err)
	assert.Equal(t, content["kubelet.exe"], string(got))

	require.NoError(t, os.WriteFile(filepath.Join(root, "payload/kubelet.exe"), []byte("tampered"), 0o644))
	out, err = exec.Command(filepath.Join(root, "usr/local/bin/wsu"), append(cf.Config.Entrypoint[1:], filepath.Join(root, "payload"), filepath.Join(root, "other"))...).CombinedOutput()
	assert.Error(t, err, "a tampered payload fails the init container")
	assert.Contains(t, string(out), "kubelet: sha256")

	// make payload-image refuses a directory that does not match.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kube-proxy.exe"), []byte("changed"), 0o644))
	_, err = BuildPayload(base, dir, b.meta)
	assert.ErrorContains(t, err, "does not match its manifest")
}

// imageFiles lists the flattened image's tar headers by name.
func imageFiles(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out[strings.TrimSuffix(h.Name, "/")] = h
	}
}

// extract reads one file of the flattened image.
func extract(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		require.NoError(t, err, "%s is not in the image", name)
		if h.Name == name {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return b
		}
	}
}

// ociLayoutDigest reads index.json from the archive and checks the blob it
// names is there with that digest.
func ociLayoutDigest(t *testing.T, archive string) v1.Hash {
	t.Helper()
	f, err := os.Open(archive)
	require.NoError(t, err)
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if h.Typeflag == tar.TypeReg && (h.Size < 1<<20) {
			entries[h.Name], err = io.ReadAll(tr)
			require.NoError(t, err)
		}
	}
	assert.JSONEq(t, `{"imageLayoutVersion":"1.0.0"}`, string(entries["oci-layout"]))
	var index v1.IndexManifest
	require.NoError(t, json.Unmarshal(entries["index.json"], &index))
	require.Len(t, index.Manifests, 1)
	d := index.Manifests[0].Digest
	man, ok := entries[blobPath(d)]
	require.True(t, ok, "the manifest blob %s is in the archive", d)
	sum := sha256.Sum256(man)
	assert.Equal(t, d.Hex, hex.EncodeToString(sum[:]))
	assert.Equal(t, "localhost/wsu:latest", index.Manifests[0].Annotations["io.containerd.image.name"])
	return d
}

func fileSHA(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	h := sha256.New()
	_, err = io.Copy(h, f)
	require.NoError(t, err)
	return hex.EncodeToString(h.Sum(nil))
}

// testSBOM checks the SBOM make image writes against go version -m of the
// image's executables, wsu and wsu-controller (the toolchain's own reading
// of their build information, not the SBOM's code): every module either
// links, at the version linked, and the Go toolchain; each one a package
// an executable of the image depends on; the same bytes for the same
// build.
func testSBOM(t *testing.T, b built) {
	data, err := SBOM(b.context, WSU(), b.meta)
	require.NoError(t, err)
	again, err := SBOM(b.context, WSU(), b.meta)
	require.NoError(t, err)
	assert.Equal(t, string(data), string(again), "reproducible")

	linked := map[string]bool{"github.com/wsu-project/wsu@" + b.meta.Version: true}
	perExe := map[string]int{} // the image's path → its modules, the stdlib and wsu's own included
	for exe, dest := range map[string]string{CtxWSU: WSUPath, CtxWSUController: WSUControllerPath} {
		mods, goVersion := goVersionM(t, filepath.Join(b.context, exe))
		linked["stdlib@"+goVersion] = true
		for _, m := range mods {
			linked[m] = true
		}
		perExe[dest] = len(mods) + 2
	}
	want := slices.Sorted(maps.Keys(linked))
	got, err := SBOMModules(data)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Contains(t, want, "sigs.k8s.io/controller-runtime@"+moduleVersion(t, "sigs.k8s.io/controller-runtime"),
		"a module go.mod requires, at its version")

	var doc struct {
		SPDXVersion   string                   `json:"spdxVersion"`
		Created       struct{ Created string } `json:"creationInfo"`
		Packages      []struct{ SPDXID, Name string }
		Relationships []struct {
			Element string `json:"spdxElementId"`
			Type    string `json:"relationshipType"`
			Related string `json:"relatedSpdxElement"`
		}
	}
	require.NoError(t, json.Unmarshal(data, &doc))
	assert.Equal(t, "SPDX-2.3", doc.SPDXVersion)
	assert.Equal(t, "2023-11-14T22:13:20Z", doc.Created.Created, "the commit's time")
	ids := map[string]string{"SPDXRef-DOCUMENT": "document"}
	for _, p := range doc.Packages {
		assert.NotContains(t, ids, p.SPDXID, "unique SPDXIDs")
		ids[p.SPDXID] = p.Name
	}
	depends := map[string]int{}
	for _, r := range doc.Relationships {
		assert.Contains(t, ids, r.Element)
		assert.Contains(t, ids, r.Related)
		if r.Type == "DEPENDS_ON" {
			depends[ids[r.Element]]++
		}
	}
	assert.Equal(t, perExe, depends, "each executable depends on each module it links")
	assert.Less(t, perExe[WSUPath], perExe[WSUControllerPath], "the CLI links fewer modules than the cluster face")
}

// goVersionM is what go version -m says exe links: its modules as
// path@version (a replacement's, where one replaced a module) and its Go
// version.
func goVersionM(t *testing.T, exe string) (mods []string, goVersion string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", exe).CombinedOutput()
	require.NoError(t, err, "%s", out)
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case i == 0 && len(f) == 2:
			goVersion = f[1]
		case len(f) >= 3 && f[0] == "dep":
			mods = append(mods, f[1]+"@"+f[2])
		case len(f) >= 3 && f[0] == "=>": // the replacement is what was linked
			mods[len(mods)-1] = f[1] + "@" + f[2]
		}
	}
	require.NotEmpty(t, mods, "go version -m lists %s's modules:\n%s", exe, out)
	require.NotEmpty(t, goVersion)
	return mods, goVersion
}

// moduleVersion is the version go.mod selects for a module.
func moduleVersion(t *testing.T, path string) string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}}", path).CombinedOutput()
	require.NoError(t, err, "%s", out)
	return strings.TrimSpace(string(out))
}
