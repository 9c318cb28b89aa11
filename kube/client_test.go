package kube

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
)

// twoContexts is a kubeconfig with contexts a (current) and b.
const twoContexts = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: secret}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u}
`

const otherConfig = `apiVersion: v1
kind: Config
current-context: c
clusters:
- name: c
  cluster: {server: "https://c.example:6443"}
users:
- name: u
  user: {token: secret}
contexts:
- name: c
  context: {cluster: c, user: u}
`

// stubEnv returns a Finder whose seams are fakes.
func stubEnv(inCluster func() (*rest.Config, error), home string) Finder {
	return Finder{InCluster: inCluster, HomeKubeconfig: func() string { return home }}
}

func notInCluster() (*rest.Config, error) { return nil, rest.ErrNotInCluster }

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	two := write("two", twoContexts)
	other := write("other", otherConfig)
	missing := filepath.Join(dir, "missing")
	inCluster := func() (*rest.Config, error) { return &rest.Config{Host: "https://10.0.0.1:443"}, nil }
	broken := func() (*rest.Config, error) { return nil, errors.New("token file unreadable") }

	tests := []struct {
		name       string
		kubeconfig string
		context    string
		env        string // KUBECONFIG
		inCluster  func() (*rest.Config, error)
		home       string
		wantHost   string
		wantErr    string
		wantNoCfg  bool
	}{
		{name: "explicit file, current context", kubeconfig: two, wantHost: "https://a.example:6443"},
		{name: "explicit file, other context", kubeconfig: two, context: "b", wantHost: "https://b.example:6443"},
		{name: "unknown context", kubeconfig: two, context: "nope", wantErr: `context "nope" does not exist`},
		{name: "explicit beats KUBECONFIG", kubeconfig: two, env: other, wantHost: "https://a.example:6443"},
		{name: "explicit beats in-cluster", kubeconfig: two, inCluster: inCluster, wantHost: "https://a.example:6443"},
		{name: "missing explicit file", kubeconfig: missing, wantErr: "missing"},
		{name: "KUBECONFIG", env: other, wantHost: "https://c.example:6443"},
		{name: "KUBECONFIG list merges", env: other + string(os.PathListSeparator) + two, context: "b", wantHost: "https://b.example:6443"},
		{name: "KUBECONFIG beats in-cluster", env: other, inCluster: inCluster, wantHost: "https://c.example:6443"},
		{name: "in-cluster", inCluster: inCluster, home: two, wantHost: "https://10.0.0.1:443"},
		{name: "in-cluster has no contexts", inCluster: inCluster, context: "a", wantErr: "in-cluster, which has no contexts"},
		{name: "in-cluster broken", inCluster: broken, wantErr: "token file unreadable"},
		{name: "home file", home: two, wantHost: "https://a.example:6443"},
		{name: "home file missing", home: missing, wantNoCfg: true},
		{name: "nothing", wantNoCfg: true},
		{name: "KUBECONFIG names only missing files", env: missing, wantNoCfg: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ic := tt.inCluster
			if ic == nil {
				ic = notInCluster
			}
			f := stubEnv(ic, tt.home)
			t.Setenv("KUBECONFIG", tt.env)
			cfg, _, err := f.Load(tt.kubeconfig, tt.context)
			switch {
			case tt.wantNoCfg:
				require.ErrorIs(t, err, ErrNoConfig)
			case tt.wantErr != "":
				require.ErrorContains(t, err, tt.wantErr)
			default:
				require.NoError(t, err)
				assert.Equal(t, tt.wantHost, cfg.Host)
				assert.Contains(t, cfg.UserAgent, "wsu/")
				assert.Equal(t, float32(50), cfg.QPS)
			}
		})
	}
}

func TestCache(t *testing.T) {
	f := stubEnv(notInCluster, "")
	dir := t.TempDir()
	two := filepath.Join(dir, "two")
	require.NoError(t, os.WriteFile(two, []byte(twoContexts), 0o600))
	t.Setenv("KUBECONFIG", "")

	run := NewCacheWith(Defaults{}, f)
	a1, err := run.Get(two, "")
	require.NoError(t, err)
	a2, err := run.Get(two, "")
	require.NoError(t, err)
	assert.Same(t, a1, a2, "one client per kubeconfig and context")
	assert.Equal(t, "kubeconfig "+two, a1.Source)

	b, err := run.Get(two, "b")
	require.NoError(t, err)
	assert.NotSame(t, a1, b)
	assert.Equal(t, "https://b.example:6443", b.Config.Host)

	other, err := NewCacheWith(Defaults{}, f).Get(two, "")
	require.NoError(t, err)
	assert.NotSame(t, a1, other, "another run has its own cache")

	// Failures are not cached: the file may be written later in the run.
	later := filepath.Join(dir, "later")
	_, err = run.Get(later, "")
	require.Error(t, err)
	require.NoError(t, os.WriteFile(later, []byte(otherConfig), 0o600))
	c, err := run.Get(later, "")
	require.NoError(t, err)
	assert.Equal(t, "https://c.example:6443", c.Config.Host)

	// The defaults follow KUBECONFIG.
	t.Setenv("KUBECONFIG", two)
	d1, err := run.Get("", "")
	require.NoError(t, err)
	t.Setenv("KUBECONFIG", later)
	d2, err := run.Get("", "")
	require.NoError(t, err)
	assert.Equal(t, "https://a.example:6443", d1.Config.Host)
	assert.Equal(t, "https://c.example:6443", d2.Config.Host)

	// --kubeconfig (Defaults.Kubeconfig) beats KUBECONFIG when the caller
	// names none, and an explicit kubeconfig still beats it.
	flag := NewCacheWith(Defaults{Kubeconfig: two}, f)
	e, err := flag.Get("", "")
	require.NoError(t, err)
	assert.Equal(t, "https://a.example:6443", e.Config.Host)
	assert.Equal(t, "kubeconfig "+two, e.Source)
	g, err := flag.Get(later, "")
	require.NoError(t, err)
	assert.Equal(t, "https://c.example:6443", g.Config.Host)

	// --context (Defaults.Context) picks the context of the kubeconfig the
	// flags and environment choose; a task naming its own kubeconfig or
	// context is not affected.
	withB := NewCacheWith(Defaults{Kubeconfig: two, Context: "b"}, f)
	h, err := withB.Get("", "")
	require.NoError(t, err)
	assert.Equal(t, "https://b.example:6443", h.Config.Host)
	i, err := withB.Get(later, "")
	require.NoError(t, err)
	assert.Equal(t, "https://c.example:6443", i.Config.Host, "a task's own kubeconfig keeps its current context")
	j, err := withB.Get("", "a")
	require.NoError(t, err)
	assert.Equal(t, "https://a.example:6443", j.Config.Host, "a task's own context wins")
	_, err = NewCacheWith(Defaults{Kubeconfig: two, Context: "nope"}, f).Get("", "")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "nope")
}

// A run's clients get one kubectl's rate limit per ten hosts it works on
// at once; a limit the configuration set itself is kept.
func TestCacheRateLimitScalesWithForks(t *testing.T) {
	f := stubEnv(notInCluster, "")
	two := filepath.Join(t.TempDir(), "two")
	require.NoError(t, os.WriteFile(two, []byte(twoContexts), 0o600))
	t.Setenv("KUBECONFIG", "")
	for _, tt := range []struct {
		parallel int
		qps      float32
		burst    int
	}{
		{0, 50, 300}, {1, 50, 300}, {10, 50, 300}, {11, 100, 600}, {50, 250, 1500}, {100, 500, 3000},
	} {
		cl, err := NewCacheWith(Defaults{Parallel: tt.parallel}, f).Get(two, "")
		require.NoError(t, err)
		assert.Equal(t, tt.qps, cl.Config.QPS, "parallel %d", tt.parallel)
		assert.Equal(t, tt.burst, cl.Config.Burst, "parallel %d", tt.parallel)
	}
	own := &rest.Config{QPS: 7, Burst: 9}
	assert.Same(t, own, scaleRateLimit(own, 50), "a limit set by the configuration is kept")
}
