package registries

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		e       Entry
		wantErr string
	}{
		{name: "mirror with an org before the source's path", e: Entry{Source: "mcr.microsoft.com/oss/kubernetes/pause", Mirrors: []string{"mirror.local:5000/custom/oss/kubernetes/pause"}}},
		{name: "mirror with the same path", e: Entry{Source: "mcr.microsoft.com/oss/kubernetes/pause", Mirrors: []string{"mirror.local/oss/kubernetes/pause"}}},
		{name: "a whole registry", e: Entry{Source: "quay.io", Mirrors: []string{"mirror.local/quay"}}},
		{name: "path suffix differs", e: Entry{Source: "quay.io/openshift-release-dev/ocp-release", Mirrors: []string{"mirror.local/ocp4/openshift4"}},
			wantErr: `does not end with the source's path "openshift-release-dev/ocp-release"`},
		{name: "only the last component matches", e: Entry{Source: "mcr.microsoft.com/oss/kubernetes/pause", Mirrors: []string{"mirror.local/x/pause"}},
			wantErr: "does not end with the source's path"},
		{name: "a component ending like the source is not a match", e: Entry{Source: "quay.io/a/pause", Mirrors: []string{"mirror.local/xa/pause"}},
			wantErr: "does not end with the source's path"},
		{name: "scheme", e: Entry{Source: "https://quay.io", Mirrors: []string{"m"}}, wantErr: "is not a registry host or repository"},
		{name: "tag", e: Entry{Source: "quay.io/a", Mirrors: []string{"m/a:1"}}, wantErr: `mirror "m/a:1" of quay.io/a is not`},
		{name: "quote", e: Entry{Source: `quay.io/a"`, Mirrors: []string{"m/a"}}, wantErr: "is not a registry host"},
		{name: "no mirrors", e: Entry{Source: "quay.io"}, wantErr: "has no mirrors"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.e)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestMerge(t *testing.T) {
	got := Merge([]Entry{
		{Source: "quay.io/b/img", Mirrors: []string{"m2.local/b/img"}},
		{Source: "mcr.microsoft.com/oss/kubernetes/pause", Mirrors: []string{"mirror.local:5000/ns/oss/kubernetes/pause", "mirror.local:5000/oss/kubernetes/pause"}},
		{Source: "quay.io/a/img", Mirrors: []string{"m2.local/a/img", "m1.local/org/a/img"}, NeverContactSource: true},
		// The same mirror of the same registry through a tag mirror set:
		// it may resolve tags.
		{Source: "quay.io", Mirrors: []string{"m2.local"}, ResolveTags: true},
	})
	want := []Registry{
		{Host: "mcr.microsoft.com", Mirrors: []Mirror{{Location: "mirror.local:5000"}, {Location: "mirror.local:5000/ns"}}},
		{Host: "quay.io", NeverContactSource: true, Mirrors: []Mirror{{Location: "m1.local/org"}, {Location: "m2.local", ResolveTags: true}}},
	}
	assert.Equal(t, want, got)
}

func TestRender(t *testing.T) {
	r := Registry{Host: "quay.io", Mirrors: []Mirror{{Location: "m1.local/org"}, {Location: "m2.local:5000", ResolveTags: true}}}
	want := Marker + `: mirrors of quay.io. wsu removes this file when quay.io is no longer mirrored.
server = "https://quay.io/v2"
override_path = true

[host."https://m1.local/v2/org"]
  capabilities = ["pull"]
  override_path = true

[host."https://m2.local:5000/v2"]
  capabilities = ["pull", "resolve"]
  override_path = true
`
	assert.Equal(t, want, string(r.Render()))

	r.NeverContactSource = true
	assert.True(t, strings.Contains(string(r.Render()), "server = \"https://m1.local/v2/org\"\n"), "the source is never the fallback")
}

func TestDir(t *testing.T) {
	assert.Equal(t, "quay.io", Dir("quay.io"))
	assert.Equal(t, "mirror.local_5000_", Dir("mirror.local:5000"))
}
