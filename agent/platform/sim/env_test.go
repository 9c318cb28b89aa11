package sim

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestEnv(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	_, ok, err := h.EnvGet(ctx, "KUBECONFIG")
	require.NoError(t, err)
	assert.False(t, ok)

	tests := []struct {
		name, value string
		wantType    host.RegistryType
	}{
		{"KUBECONFIG", `C:\k\kubeconfig`, host.RegSZ},
		{"WSU_HOME", `%SystemDrive%\k`, host.RegExpandSZ},
		{"TEMP", `C:\Temp`, host.RegExpandSZ}, // an existing REG_EXPAND_SZ keeps its type
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, h.EnvSet(ctx, tt.name, tt.value))
			got, ok, err := h.EnvGet(ctx, tt.name)
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, tt.value, got)
			v, err := h.RegistryGet(ctx, envKey, tt.name)
			require.NoError(t, err)
			assert.Equal(t, tt.wantType, v.Type, "stored where Windows stores it")
		})
	}
	got, ok, err := h.EnvGet(ctx, "kubeconfig")
	require.NoError(t, err)
	assert.True(t, ok, "names ignore case")
	assert.Equal(t, `C:\k\kubeconfig`, got)

	require.NoError(t, h.EnvDelete(ctx, "KubeConfig"))
	require.NoError(t, h.EnvDelete(ctx, "KUBECONFIG"), "missing is fine")
	_, ok, err = h.EnvGet(ctx, "KUBECONFIG")
	require.NoError(t, err)
	assert.False(t, ok)

	assert.Error(t, h.EnvSet(ctx, "A=B", "x"))
	assert.Error(t, h.EnvSet(ctx, "", "x"))
}

func TestPathAddRemove(t *testing.T) {
	ctx := context.Background()
	type step struct {
		op          string // add, remove
		dir         string
		wantChanged bool
		wantPath    string
	}
	tests := []struct {
		name  string
		start string // "" : no Path value
		steps []step
	}{
		{"add is idempotent", `C:\Windows`, []step{
			{"add", `C:\k`, true, `C:\Windows;C:\k`},
			{"add", `C:\k`, false, `C:\Windows;C:\k`},
			{"add", `c:\K`, false, `C:\Windows;C:\k`},
			{"add", `C:\k\`, false, `C:\Windows;C:\k`},
			{"add", `C:\k\cni`, true, `C:\Windows;C:\k;C:\k\cni`},
		}},
		{"trailing backslash in the existing entry", `C:\Windows;C:\k\;C:\Other`, []step{
			{"add", `C:\k`, false, `C:\Windows;C:\k\;C:\Other`},
			{"remove", `c:\k`, true, `C:\Windows;C:\Other`},
			{"remove", `C:\k`, false, `C:\Windows;C:\Other`},
		}},
		{"remove takes every duplicate, keeps order", `C:\a;C:\k;C:\b;c:\K\;C:\c`, []step{
			{"remove", `C:\k`, true, `C:\a;C:\b;C:\c`},
		}},
		{"trailing separator", `C:\Windows;`, []step{
			{"add", `C:\k`, true, `C:\Windows;C:\k`},
		}},
		{"no Path yet", "", []step{
			{"remove", `C:\k`, false, ""},
			{"add", `C:\k`, true, `C:\k`},
			{"remove", `C:\k`, true, ""},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.start == "" {
				require.NoError(t, h.RegistryDelete(ctx, envKey, "Path"))
			} else {
				require.NoError(t, h.RegistrySet(ctx, envKey, "Path", host.RegistryValue{Type: host.RegExpandSZ, String: tt.start}))
			}
			for i, s := range tt.steps {
				var changed bool
				var err error
				if s.op == "add" {
					changed, err = h.PathAdd(ctx, s.dir)
				} else {
					changed, err = h.PathRemove(ctx, s.dir)
				}
				require.NoError(t, err, "step %d", i)
				assert.Equal(t, s.wantChanged, changed, "step %d: %s %s", i, s.op, s.dir)
				v, err := h.RegistryGet(ctx, envKey, "PATH")
				require.NoError(t, err)
				assert.Equal(t, s.wantPath, v.String, "step %d", i)
				if v.Exists {
					assert.Equal(t, host.RegExpandSZ, v.Type)
				}
			}
		})
	}
}

func TestPathRejects(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	for _, dir := range []string{"", `\`, `C:\a;C:\b`} {
		_, err := h.PathAdd(ctx, dir)
		assert.Error(t, err, "%q", dir)
		_, err = h.PathRemove(ctx, dir)
		assert.Error(t, err, "%q", dir)
	}
}
