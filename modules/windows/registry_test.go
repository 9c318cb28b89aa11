package windows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zclconf/go-cty/cty"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

const hnsKey = `HKLM\SYSTEM\CurrentControlSet\Services\hns\State`

func TestRegistry(t *testing.T) {
	tests := []struct {
		name       string
		existing   *host.RegistryValue
		attrs      map[string]cty.Value // key and name are added
		wantAction modules.Action
		wantFields []string
		wantValue  cty.Value // the result's value
		want       host.RegistryValue
	}{
		{
			name:       "create string",
			attrs:      map[string]cty.Value{"value": cty.StringVal("on")},
			wantAction: modules.Create, wantFields: []string{"type", "value"},
			wantValue: cty.StringVal("on"),
			want:      host.RegistryValue{Exists: true, Type: host.RegSZ, String: "on"},
		},
		{
			name:       "create expand string",
			attrs:      map[string]cty.Value{"type": cty.StringVal("REG_EXPAND_SZ"), "value": cty.StringVal(`%SystemRoot%\k`)},
			wantAction: modules.Create, wantFields: []string{"type", "value"},
			wantValue: cty.StringVal(`%SystemRoot%\k`),
			want:      host.RegistryValue{Exists: true, Type: host.RegExpandSZ, String: `%SystemRoot%\k`},
		},
		{
			name:       "create multi string",
			attrs:      map[string]cty.Value{"type": cty.StringVal("REG_MULTI_SZ"), "value": cty.TupleVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")})},
			wantAction: modules.Create, wantFields: []string{"type", "value"},
			wantValue: strs("a", "b"),
			want:      host.RegistryValue{Exists: true, Type: host.RegMultiSZ, Strings: []string{"a", "b"}},
		},
		{
			name:       "create dword, type in lower case",
			attrs:      map[string]cty.Value{"type": cty.StringVal("reg_dword"), "value": cty.NumberIntVal(1)},
			wantAction: modules.Create, wantFields: []string{"type", "value"},
			wantValue: cty.NumberIntVal(1),
			want:      host.RegistryValue{Exists: true, Type: host.RegDWORD, Integer: 1},
		},
		{
			name:       "create qword from a numeric string",
			attrs:      map[string]cty.Value{"type": cty.StringVal("REG_QWORD"), "value": cty.StringVal("18446744073709551615")},
			wantAction: modules.Create, wantFields: []string{"type", "value"},
			wantValue: cty.NumberUIntVal(18446744073709551615),
			want:      host.RegistryValue{Exists: true, Type: host.RegQWORD, Integer: 18446744073709551615},
		},
		{
			name:       "create binary",
			attrs:      map[string]cty.Value{"type": cty.StringVal("REG_BINARY"), "value": cty.StringVal("AAH/")},
			wantAction: modules.Create, wantFields: []string{"type", "value"},
			wantValue: cty.StringVal("AAH/"),
			want:      host.RegistryValue{Exists: true, Type: host.RegBinary, Binary: []byte{0, 1, 0xff}},
		},
		{
			name:      "in sync",
			existing:  &host.RegistryValue{Type: host.RegDWORD, Integer: 1},
			attrs:     map[string]cty.Value{"type": cty.StringVal("REG_DWORD"), "value": cty.NumberIntVal(1)},
			wantValue: cty.NumberIntVal(1),
			want:      host.RegistryValue{Exists: true, Type: host.RegDWORD, Integer: 1},
		},
		{
			name:       "value only",
			existing:   &host.RegistryValue{Type: host.RegDWORD, Integer: 0},
			attrs:      map[string]cty.Value{"type": cty.StringVal("REG_DWORD"), "value": cty.NumberIntVal(1)},
			wantAction: modules.Update, wantFields: []string{"value"},
			wantValue: cty.NumberIntVal(1),
			want:      host.RegistryValue{Exists: true, Type: host.RegDWORD, Integer: 1},
		},
		{
			name:       "type only",
			existing:   &host.RegistryValue{Type: host.RegSZ, String: `%SystemRoot%`},
			attrs:      map[string]cty.Value{"type": cty.StringVal("REG_EXPAND_SZ"), "value": cty.StringVal(`%SystemRoot%`)},
			wantAction: modules.Update, wantFields: []string{"type"},
			wantValue: cty.StringVal(`%SystemRoot%`),
			want:      host.RegistryValue{Exists: true, Type: host.RegExpandSZ, String: `%SystemRoot%`},
		},
		{
			name:       "type and value",
			existing:   &host.RegistryValue{Type: host.RegSZ, String: "1"},
			attrs:      map[string]cty.Value{"type": cty.StringVal("REG_DWORD"), "value": cty.NumberIntVal(1)},
			wantAction: modules.Update, wantFields: []string{"type", "value"},
			wantValue: cty.NumberIntVal(1),
			want:      host.RegistryValue{Exists: true, Type: host.RegDWORD, Integer: 1},
		},
		{
			name:       "absent deletes",
			existing:   &host.RegistryValue{Type: host.RegSZ, String: "x"},
			attrs:      map[string]cty.Value{"state": cty.StringVal("absent")},
			wantAction: modules.Delete, wantFields: []string{"type", "value"},
			wantValue: cty.NullVal(cty.DynamicPseudoType),
		},
		{
			name:      "absent already",
			attrs:     map[string]cty.Value{"state": cty.StringVal("absent")},
			wantValue: cty.NullVal(cty.DynamicPseudoType),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHost(t)
			if tt.existing != nil {
				require.NoError(t, h.RegistrySet(ctx, hnsKey, "EnableCompartmentNamespace", *tt.existing))
			}
			attrs := map[string]cty.Value{"key": cty.StringVal(hnsKey), "name": cty.StringVal("EnableCompartmentNamespace")}
			for k, v := range tt.attrs {
				attrs[k] = v
			}
			cfg := cfgFor(t, Registry{}, attrs)
			pr, _ := converge(t, Registry{}, h, cfg)
			assert.Equal(t, tt.wantAction, action(pr.Change))
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
			if pr.Change != nil {
				assert.Equal(t, hnsKey+`\EnableCompartmentNamespace`, pr.Change.Subject)
			}
			assert.True(t, tt.wantValue.RawEquals(pr.Result.GetAttr("value")), "result value %#v", pr.Result.GetAttr("value"))
			got, err := h.RegistryGet(ctx, hnsKey, "EnableCompartmentNamespace")
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestRegistryFieldValues(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.RegistrySet(ctx, hnsKey, "Names", host.RegistryValue{Type: host.RegMultiSZ, Strings: []string{"a"}}))
	cfg := cfgFor(t, Registry{}, map[string]cty.Value{
		// A long hive name and a trailing backslash are the same key.
		"key": cty.StringVal(`HKEY_LOCAL_MACHINE\SYSTEM\CurrentControlSet\Services\hns\State\`), "name": cty.StringVal("Names"),
		"type": cty.StringVal("REG_MULTI_SZ"), "value": strs("a", "b"),
	})
	pr := plan(t, Registry{}, h, cfg)
	require.NotNil(t, pr.Change)
	assert.Equal(t, hnsKey+`\Names`, pr.Change.Subject)
	assert.Equal(t, []string{"value"}, fieldNames(pr.Change))
	assert.Equal(t, strs("a"), field(t, pr.Change, "value").Old)
	assert.Equal(t, strs("a", "b"), field(t, pr.Change, "value").New)
	assert.Equal(t, cty.StringVal(hnsKey), pr.Result.GetAttr("key"))
}

func TestRegistryDefaultValue(t *testing.T) {
	h := newHost(t)
	cfg := cfgFor(t, Registry{}, map[string]cty.Value{"key": cty.StringVal(`HKLM\SOFTWARE\wsu`), "value": cty.StringVal("1.0")})
	pr, _ := converge(t, Registry{}, h, cfg)
	require.NotNil(t, pr.Change)
	assert.Equal(t, `HKLM\SOFTWARE\wsu (default)`, pr.Change.Subject)
	got, err := h.RegistryGet(ctx, `HKLM\SOFTWARE\wsu`, "")
	require.NoError(t, err)
	assert.Equal(t, "1.0", got.String)
}

func TestRegistryUnknown(t *testing.T) {
	h := newHost(t)
	require.NoError(t, h.RegistrySet(ctx, hnsKey, "X", host.RegistryValue{Type: host.RegDWORD, Integer: 1}))
	base := func(extra map[string]cty.Value) map[string]cty.Value {
		m := map[string]cty.Value{"key": cty.StringVal(hnsKey), "name": cty.StringVal("X"), "type": cty.StringVal("REG_DWORD"), "value": cty.NumberIntVal(1)}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	tests := []struct {
		name        string
		attrs       map[string]cty.Value
		wantSubject string
		wantFields  []string
	}{
		{"value", base(map[string]cty.Value{"value": cty.DynamicVal}), hnsKey + `\X`, []string{"value"}},
		{"type", base(map[string]cty.Value{"type": unknownStr}), hnsKey + `\X`, []string{"type", "value"}},
		{"key", base(map[string]cty.Value{"key": unknownStr}), knownAfterApply, []string{"type", "value"}},
		{"state", base(map[string]cty.Value{"state": unknownStr}), hnsKey + `\X`, []string{"type", "value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr := plan(t, Registry{}, h, cfgFor(t, Registry{}, tt.attrs))
			require.False(t, pr.Diagnostics.HasErrors(), "%v", pr.Diagnostics)
			require.NotNil(t, pr.Change)
			assert.Equal(t, modules.Update, pr.Change.Action)
			assert.Equal(t, tt.wantSubject, pr.Change.Subject)
			assert.Equal(t, tt.wantFields, fieldNames(pr.Change))
		})
	}
}

func TestRegistryValidate(t *testing.T) {
	key := cty.StringVal(hnsKey)
	row := func(name, typ string, value cty.Value, summary, attr string) validateCase {
		return validateCase{name: name, attrs: map[string]cty.Value{"key": key, "type": cty.StringVal(typ), "value": value}, wantSummary: summary, wantAttr: attr}
	}
	runValidate(t, Registry{}, []validateCase{
		row("string", "REG_SZ", cty.StringVal("x"), "", ""),
		row("number as string", "REG_SZ", cty.NumberIntVal(5), "", ""),
		row("empty multi", "REG_MULTI_SZ", cty.ListValEmpty(cty.String), "", ""),
		row("dword max", "REG_DWORD", cty.NumberIntVal(4294967295), "", ""),
		row("dword too large", "REG_DWORD", cty.NumberIntVal(4294967296), "Invalid value", "value"),
		row("dword negative", "REG_DWORD", cty.NumberIntVal(-1), "Invalid value", "value"),
		row("dword fraction", "REG_DWORD", cty.NumberFloatVal(1.5), "Invalid value", "value"),
		row("dword not a number", "REG_DWORD", cty.StringVal("one"), "Invalid value", "value"),
		row("multi with empty string", "REG_MULTI_SZ", strs("a", ""), "Invalid value", "value"),
		row("multi from a string", "REG_MULTI_SZ", cty.StringVal("a"), "Invalid value", "value"),
		row("binary not base64", "REG_BINARY", cty.StringVal("not base64!"), "Invalid value", "value"),
		row("string from a list", "REG_SZ", strs("a"), "Invalid value", "value"),
		row("bad type", "REG_NONE", cty.StringVal("x"), "Invalid type", "type"),
		{name: "missing value", attrs: map[string]cty.Value{"key": key}, wantSummary: "Missing value", wantAttr: "value"},
		{name: "absent needs no value", attrs: map[string]cty.Value{"key": key, "state": cty.StringVal("absent")}},
		{name: "powershell drive", attrs: map[string]cty.Value{"key": cty.StringVal(`HKLM:\SOFTWARE\x`), "value": cty.StringVal("x")}},
		{name: "no hive", attrs: map[string]cty.Value{"key": cty.StringVal(`SOFTWARE\x`), "value": cty.StringVal("x")}, wantSummary: "Invalid registry key", wantAttr: "key"},
		{name: "forward slashes", attrs: map[string]cty.Value{"key": cty.StringVal("HKLM/SOFTWARE/x"), "value": cty.StringVal("x")}, wantSummary: "Invalid registry key", wantAttr: "key"},
		{name: "hive only", attrs: map[string]cty.Value{"key": cty.StringVal(`HKLM\`), "value": cty.StringVal("x")}, wantSummary: "Invalid registry key", wantAttr: "key"},
		{name: "empty key name", attrs: map[string]cty.Value{"key": cty.StringVal(`HKLM\SOFTWARE\\x`), "value": cty.StringVal("x")}, wantSummary: "Invalid registry key", wantAttr: "key"},
		{name: "null name", attrs: map[string]cty.Value{"key": key, "name": cty.NullVal(cty.String), "value": cty.StringVal("x")}, wantSummary: "Null name", wantAttr: "name"},
		{name: "bad state", attrs: map[string]cty.Value{"key": key, "value": cty.StringVal("x"), "state": cty.StringVal("gone")}, wantSummary: "Invalid state", wantAttr: "state"},
	})
}
