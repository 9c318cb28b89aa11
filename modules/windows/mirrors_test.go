package windows

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
	"github.com/wsu-project/wsu/registries"
)

func mirrorVal(source string, resolve bool, mirrors ...string) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"source": cty.StringVal(source), "mirrors": strs(mirrors...),
		"resolve_tags": cty.BoolVal(resolve), "never_contact_source": cty.False,
	})
}

func mirrorList(vals ...cty.Value) cty.Value {
	if len(vals) == 0 {
		return cty.ListValEmpty(MirrorType)
	}
	return cty.ListVal(vals)
}

func TestContainerdMirrorsValidate(t *testing.T) {
	runValidate(t, ContainerdMirrors{}, []validateCase{
		{name: "valid", attrs: map[string]cty.Value{"mirrors": mirrorList(mirrorVal("quay.io", false, "m.local/q"))}},
		{name: "suffix differs", attrs: map[string]cty.Value{"mirrors": mirrorList(mirrorVal("quay.io/a/b", false, "m.local/c"))},
			wantSummary: "Mirror containerd cannot use", wantAttr: "mirrors"},
		{name: "relative dir", attrs: map[string]cty.Value{"mirrors": mirrorList(), "dir": cty.StringVal(`k\registries`)},
			wantSummary: "Invalid Windows path", wantAttr: "dir"},
	})
}

func TestContainerdMirrors(t *testing.T) {
	const dir = RegistriesDir
	pause := mirrorVal("mcr.microsoft.com/oss/kubernetes/pause", true, "mirror.local:5000/win/oss/kubernetes/pause")
	quay := mirrorVal("quay.io/org/img", false, "mirror.local:5000/org/img")
	mcrFile := dir + `\mcr.microsoft.com\hosts.toml`
	quayFile := dir + `\quay.io\hosts.toml`
	h := newHost(t)
	// Someone else's file for another registry: never touched.
	writeFile(t, h, dir+`\docker.io\hosts.toml`, "server = \"https://docker.io\"\n")

	type step struct {
		name        string
		mirrors     cty.Value
		wantFields  []string
		wantFiles   []string
		wantRemoved []string
	}
	steps := []step{
		{name: "two registries", mirrors: mirrorList(pause, quay),
			wantFields: []string{`mcr.microsoft.com\hosts.toml`, `quay.io\hosts.toml`}, wantFiles: []string{mcrFile, quayFile}},
		{name: "again: nothing to do", mirrors: mirrorList(quay, pause), wantFiles: []string{mcrFile, quayFile}},
		{name: "quay no longer mirrored", mirrors: mirrorList(pause),
			wantFields: []string{`quay.io\hosts.toml`}, wantFiles: []string{mcrFile}, wantRemoved: []string{quayFile}},
		{name: "pause mirror moves", mirrors: mirrorList(mirrorVal("mcr.microsoft.com/oss/kubernetes/pause", true, "other.local/oss/kubernetes/pause")),
			wantFields: []string{`mcr.microsoft.com\hosts.toml`}, wantFiles: []string{mcrFile}},
		{name: "none", mirrors: mirrorList(),
			wantFields: []string{`mcr.microsoft.com\hosts.toml`}, wantRemoved: []string{mcrFile}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			cfg := cfgFor(t, ContainerdMirrors{}, map[string]cty.Value{"mirrors": s.mirrors})
			pr, _ := converge(t, ContainerdMirrors{}, h, cfg)
			assert.Equal(t, s.wantFields, fieldNames(pr.Change))
			assert.Equal(t, listVal(s.wantFiles), pr.Result.GetAttr("files"))
			assert.Equal(t, listVal(s.wantRemoved), pr.Result.GetAttr("removed"))
			for _, f := range s.wantFiles {
				assert.True(t, strings.HasPrefix(readFile(t, h, f), registries.Marker), f)
			}
			for _, f := range s.wantRemoved {
				fi, err := h.Stat(ctx, parentDir(f))
				require.NoError(t, err)
				assert.False(t, fi.Exists, "%s's directory is removed with it", f)
			}
			assert.Equal(t, "server = \"https://docker.io\"\n", readFile(t, h, dir+`\docker.io\hosts.toml`))
		})
	}
	t.Run("content", func(t *testing.T) {
		cfg := cfgFor(t, ContainerdMirrors{}, map[string]cty.Value{"mirrors": mirrorList(pause)})
		converge(t, ContainerdMirrors{}, h, cfg)
		got := readFile(t, h, mcrFile)
		assert.Contains(t, got, "server = \"https://mcr.microsoft.com/v2\"\n")
		assert.Contains(t, got, "[host.\"https://mirror.local:5000/v2/win\"]\n  capabilities = [\"pull\", \"resolve\"]\n")
	})
	t.Run("a registry with a port", func(t *testing.T) {
		cfg := cfgFor(t, ContainerdMirrors{}, map[string]cty.Value{"mirrors": mirrorList(mirrorVal("registry.local:8443/a", false, "m.local/a"))})
		pr, _ := converge(t, ContainerdMirrors{}, h, cfg)
		assert.Equal(t, listVal([]string{dir + `\registry.local_8443_\hosts.toml`}), pr.Result.GetAttr("files"))
	})
	t.Run("skip_invalid warns and writes the rest", func(t *testing.T) {
		cfg := cfgFor(t, ContainerdMirrors{}, map[string]cty.Value{"skip_invalid": cty.True, "mirrors": mirrorList(
			pause, mirrorVal("quay.io/openshift-release-dev/ocp-release", false, "mirror.local/ocp4/openshift4"))})
		pr, _ := converge(t, ContainerdMirrors{}, h, cfg)
		d := requireDiag(t, pr.Diagnostics, cfg, hcl.DiagWarning, "Mirror left out", "mirrors")
		assert.Contains(t, d.Detail, "does not end with the source's path")
		assert.Equal(t, listVal([]string{mcrFile}), pr.Result.GetAttr("files"))
		assert.Equal(t, 1, pr.Result.GetAttr("skipped").LengthInt())
	})
	t.Run("unknown mirrors plan a change", func(t *testing.T) {
		cfg := cfgFor(t, ContainerdMirrors{}, map[string]cty.Value{"mirrors": cty.UnknownVal(cty.List(MirrorType))})
		pr := plan(t, ContainerdMirrors{}, h, cfg)
		require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
		assert.Equal(t, modules.Update, action(pr.Change))
		assert.Equal(t, dir, pr.Change.Subject)
	})
}

// TestContainerdMirrorsAuth: a mirror whose registry has credentials in
// auths gets them as its Authorization header, the file's ACL is held to
// SYSTEM and Administrators, and the plan's field for it is sensitive (a
// plan never shows the header), also when the credentials go again.
func TestContainerdMirrorsAuth(t *testing.T) {
	const secret = "dXNlcjpzM2NyZXQ=" // user:s3cret
	h := newHost(t)
	file := RegistriesDir + `\quay.io\hosts.toml`
	quay := mirrorVal("quay.io/org/img", false, "mirror.local:5000/org/img")
	auths := cty.MapVal(map[string]cty.Value{"mirror.local:5000": cty.StringVal(secret), "other.local": cty.StringVal("b3RoZXI6eA==")})
	cfg := cfgFor(t, ContainerdMirrors{}, map[string]cty.Value{"mirrors": mirrorList(quay), "auths": auths})
	pr, _ := converge(t, ContainerdMirrors{}, h, cfg)
	require.NotNil(t, pr.Change)
	require.Len(t, pr.Change.Fields, 1)
	assert.True(t, pr.Change.Fields[0].Sensitive, "a file with credentials is never shown")
	got := readFile(t, h, file)
	assert.Contains(t, got, "[host.\"https://mirror.local:5000/v2\".header]\n  Authorization = \"Basic "+secret+"\"\n")
	assert.NotContains(t, got, "b3RoZXI6eA==", "only the mirror's registry's credentials")
	acl, err := h.FileACL(ctx, file)
	require.NoError(t, err)
	assert.True(t, acl.Satisfies(host.AdminsOnlyACL()), "SYSTEM and Administrators only: %s", acl)

	t.Run("without credentials: the old content stays hidden", func(t *testing.T) {
		cfg := cfgFor(t, ContainerdMirrors{}, map[string]cty.Value{"mirrors": mirrorList(quay)})
		pr, _ := converge(t, ContainerdMirrors{}, h, cfg)
		require.NotNil(t, pr.Change)
		assert.True(t, pr.Change.Fields[0].Sensitive, "the old content held the header")
		assert.NotContains(t, readFile(t, h, file), "Authorization")
	})
}
