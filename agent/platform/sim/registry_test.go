package sim

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
)

func TestRegistryRoundTrip(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	const key = `HKLM\SYSTEM\CurrentControlSet\Services\hns\State`
	tests := []struct {
		name string
		set  host.RegistryValue
		want host.RegistryValue
	}{
		{"REG_SZ", host.RegistryValue{Type: host.RegSZ, String: "value"}, host.RegistryValue{Exists: true, Type: host.RegSZ, String: "value"}},
		{"empty REG_SZ", host.RegistryValue{Type: host.RegSZ}, host.RegistryValue{Exists: true, Type: host.RegSZ}},
		{"REG_EXPAND_SZ", host.RegistryValue{Type: host.RegExpandSZ, String: `%SystemRoot%\x`}, host.RegistryValue{Exists: true, Type: host.RegExpandSZ, String: `%SystemRoot%\x`}},
		{"REG_MULTI_SZ", host.RegistryValue{Type: host.RegMultiSZ, Strings: []string{"a", "b c"}}, host.RegistryValue{Exists: true, Type: host.RegMultiSZ, Strings: []string{"a", "b c"}}},
		{"REG_DWORD", host.RegistryValue{Type: host.RegDWORD, Integer: math.MaxUint32}, host.RegistryValue{Exists: true, Type: host.RegDWORD, Integer: math.MaxUint32}},
		{"REG_QWORD", host.RegistryValue{Type: host.RegQWORD, Integer: math.MaxUint64}, host.RegistryValue{Exists: true, Type: host.RegQWORD, Integer: math.MaxUint64}},
		{"REG_BINARY", host.RegistryValue{Type: host.RegBinary, Binary: []byte{0, 1, 0xff}}, host.RegistryValue{Exists: true, Type: host.RegBinary, Binary: []byte{0, 1, 0xff}}},
		{"fields of other types dropped", host.RegistryValue{Type: host.RegDWORD, Integer: 7, String: "x", Binary: []byte{1}}, host.RegistryValue{Exists: true, Type: host.RegDWORD, Integer: 7}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.NoError(t, h.RegistrySet(ctx, key, tt.name, tt.set))
			got, err := h.RegistryGet(ctx, key, tt.name)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			// A second Host reads the persisted value identically.
			h2, err := New(h.Root(), Options{})
			require.NoError(t, err)
			got, err = h2.RegistryGet(ctx, key, tt.name)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRegistryKeysAndNames(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	v := host.RegistryValue{Type: host.RegDWORD, Integer: 1}
	require.NoError(t, h.RegistrySet(ctx, `HKLM\SOFTWARE\wsu\Sub`, "Flag", v))
	want := host.RegistryValue{Exists: true, Type: host.RegDWORD, Integer: 1}
	for _, spelling := range []struct{ key, name string }{
		{`HKLM\SOFTWARE\wsu\Sub`, "Flag"},
		{`hklm\software\WSU\sub`, "flag"},
		{`HKEY_LOCAL_MACHINE\SOFTWARE\wsu\Sub\`, "FLAG"},
	} {
		got, err := h.RegistryGet(ctx, spelling.key, spelling.name)
		require.NoError(t, err)
		assert.Equal(t, want, got, spelling.key)
	}
	for _, hive := range []string{"HKCU", "HKEY_CURRENT_USER", "HKCR", "HKEY_CLASSES_ROOT", "HKU", "HKEY_USERS", "HKCC", "HKEY_CURRENT_CONFIG"} {
		require.NoError(t, h.RegistrySet(ctx, hive+`\wsu-test`, hive, v), hive)
	}
	got, err := h.RegistryGet(ctx, `HKEY_CURRENT_USER\wsu-test`, "HKCU")
	require.NoError(t, err)
	assert.True(t, got.Exists, "short and long hive names are one hive")

	for _, missing := range []struct{ key, name string }{
		{`HKLM\SOFTWARE\wsu\Sub`, "Other"},
		{`HKLM\SOFTWARE\nope`, "Flag"},
		{`HKLM\SOFTWARE\wsu\Sub`, ""},
	} {
		got, err := h.RegistryGet(ctx, missing.key, missing.name)
		require.NoError(t, err)
		assert.Equal(t, host.RegistryValue{}, got)
	}

	require.NoError(t, h.RegistrySet(ctx, `HKLM\SOFTWARE\wsu\Sub`, "", host.RegistryValue{Type: host.RegSZ, String: "default"}))
	got, err = h.RegistryGet(ctx, `HKLM\SOFTWARE\wsu\Sub`, "")
	require.NoError(t, err)
	assert.Equal(t, "default", got.String, "the default value has an empty name")

	require.NoError(t, h.RegistryDelete(ctx, `hklm\software\wsu\sub`, "FLAG"))
	require.NoError(t, h.RegistryDelete(ctx, `HKLM\SOFTWARE\wsu\Sub`, "Flag"), "missing is fine")
	require.NoError(t, h.RegistryDelete(ctx, `HKLM\SOFTWARE\nope`, "x"), "missing key is fine")
	got, err = h.RegistryGet(ctx, `HKLM\SOFTWARE\wsu\Sub`, "Flag")
	require.NoError(t, err)
	assert.False(t, got.Exists)
}

func TestRegistryRejects(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	tests := []struct {
		name, key string
		v         host.RegistryValue
		wantErr   string
	}{
		{"unknown hive", `HKXX\x`, host.RegistryValue{Type: host.RegSZ}, "unknown hive"},
		{"no hive", `SOFTWARE\x`, host.RegistryValue{Type: host.RegSZ}, "unknown hive"},
		{"empty key name", `HKLM\a\\b`, host.RegistryValue{Type: host.RegSZ}, "empty key name"},
		{"unknown type", `HKLM\x`, host.RegistryValue{Type: "REG_LINK"}, "unknown registry type"},
		{"no type", `HKLM\x`, host.RegistryValue{String: "x"}, "unknown registry type"},
		{"DWORD overflow", `HKLM\x`, host.RegistryValue{Type: host.RegDWORD, Integer: math.MaxUint32 + 1}, "32 bits"},
		{"NUL in string", `HKLM\x`, host.RegistryValue{Type: host.RegSZ, String: "a\x00b"}, "NUL"},
		{"empty MULTI_SZ element", `HKLM\x`, host.RegistryValue{Type: host.RegMultiSZ, Strings: []string{"a", ""}}, "empty string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorContains(t, h.RegistrySet(ctx, tt.key, "v", tt.v), tt.wantErr)
		})
	}
	_, err := h.RegistryGet(ctx, `HKXX\x`, "v")
	assert.ErrorContains(t, err, "unknown hive")
}

// TestRegistrySeed: a new root looks like a fresh Windows Server 2022.
func TestRegistrySeed(t *testing.T) {
	ctx := context.Background()
	h := newHost(t)
	got, err := h.RegistryGet(ctx, `HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion`, "CurrentBuild")
	require.NoError(t, err)
	assert.Equal(t, "20348", got.String)
	got, err = h.RegistryGet(ctx, `HKLM\SYSTEM\CurrentControlSet\Control\Session Manager\Environment`, "Path")
	require.NoError(t, err)
	assert.Equal(t, host.RegExpandSZ, got.Type)
}
