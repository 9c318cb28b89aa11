package windows

import (
	"context"
	"encoding/base64"
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/modules"
)

// Registry manages one registry value.
type Registry struct{}

var (
	_ modules.Module    = Registry{}
	_ modules.Validator = Registry{}
)

var registryResults = []modules.Attribute{
	{Name: "key", Type: cty.String, Description: "The key, with its hive abbreviated (`HKLM\\...`)."},
	{Name: "name", Type: cty.String, Description: "The value's name; `\"\"` for the key's default value."},
	{Name: "type", Type: cty.String, Description: "The value's type; null when `state = \"absent\"`."},
	{Name: "value", Type: cty.DynamicPseudoType, Description: "The data in the form `value` takes (base64 for REG_BINARY); null when `state = \"absent\"`."},
}

var registryTypes = []host.RegistryType{host.RegSZ, host.RegExpandSZ, host.RegMultiSZ, host.RegDWORD, host.RegQWORD, host.RegBinary}

func (Registry) Schema() modules.Schema {
	return modules.Schema{
		Name:    "win_registry",
		Summary: "Set or delete a registry value on a Windows host.",
		Description: "Makes one registry value hold exactly the given type and data, creating the key " +
			"if needed, or deletes the value. The plan shows the type and the data old → new.\n\n" +
			"`value` takes the form its type needs: a string for REG_SZ and REG_EXPAND_SZ (the " +
			"`%VARIABLES%` of an expand string are stored unexpanded); a list of non-empty strings " +
			"for REG_MULTI_SZ; a whole number for REG_DWORD (0 to 4294967295) and REG_QWORD " +
			"(0 to 18446744073709551615); a standard base64 string for REG_BINARY " +
			"(`base64encode(...)` or `filebase64(...)`).",
		Target: modules.TargetHost,
		Attributes: []modules.Attribute{
			{Name: "key", Type: cty.String, Required: true,
				Description: "Full key path starting with a hive: `HKLM`, `HKCU`, `HKCR`, `HKU` or `HKCC` (or their `HKEY_...` names), such as `HKLM\\SYSTEM\\CurrentControlSet\\Services\\hns\\State`."},
			{Name: "name", Type: cty.String, Default: cty.StringVal(""),
				Description: "The value's name; `\"\"` means the key's default value."},
			{Name: "type", Type: cty.String, Default: cty.StringVal(string(host.RegSZ)),
				Description: "`REG_SZ`, `REG_EXPAND_SZ`, `REG_MULTI_SZ`, `REG_DWORD`, `REG_QWORD` or `REG_BINARY`."},
			{Name: "value", Type: cty.DynamicPseudoType,
				Description: "The data, in the form the type needs (see above). Required unless `state = \"absent\"`."},
			{Name: "state", Type: cty.String, Default: cty.StringVal("present"),
				Description: "`\"present\"` to set the value, `\"absent\"` to delete it (type and value are then ignored)."},
		},
		Results: registryResults,
		Example: `task "hns_dsr" {
  win_registry {
    key   = "HKLM\\SYSTEM\\CurrentControlSet\\Services\\hns\\State"
    name  = "EnableCompartmentNamespace"
    type  = "REG_DWORD"
    value = 1
  }
}`,
	}
}

var hives = map[string]string{
	"HKLM": "HKLM", "HKEY_LOCAL_MACHINE": "HKLM",
	"HKCU": "HKCU", "HKEY_CURRENT_USER": "HKCU",
	"HKCR": "HKCR", "HKEY_CLASSES_ROOT": "HKCR",
	"HKU": "HKU", "HKEY_USERS": "HKU",
	"HKCC": "HKCC", "HKEY_CURRENT_CONFIG": "HKCC",
}

// normKey abbreviates the hive (the form the Host API takes) and drops a
// trailing backslash; why explains a key that cannot be used.
func normKey(k string) (key, why string) {
	parts := strings.Split(k, `\`)
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	hive, ok := hives[strings.ToUpper(strings.TrimSuffix(parts[0], ":"))]
	switch {
	case !ok:
		return "", "must start with a hive (HKLM, HKCU, HKCR, HKU or HKCC) and a backslash"
	case len(parts) < 2:
		return "", "names a hive, not a key in it"
	}
	for _, p := range parts[1:] {
		switch {
		case p == "":
			return "", "contains an empty key name (two backslashes in a row)"
		case len(p) > 255:
			return "", "has a key name longer than 255 characters"
		}
	}
	return hive + `\` + strings.Join(parts[1:], `\`), ""
}

func regType(s string) (host.RegistryType, bool) {
	for _, t := range registryTypes {
		if strings.EqualFold(s, string(t)) {
			return t, true
		}
	}
	return "", false
}

// decodeRegValue converts the configured value to the host's form and to
// its canonical cty form (what plans and results show).
func decodeRegValue(t host.RegistryType, v cty.Value) (host.RegistryValue, cty.Value, error) {
	rv := host.RegistryValue{Exists: true, Type: t}
	switch t {
	case host.RegSZ, host.RegExpandSZ:
		s, err := convert.Convert(v, cty.String)
		if err != nil || s.IsNull() {
			return rv, cty.NilVal, fmt.Errorf("a %s value must be a string", t)
		}
		rv.String = s.AsString()
		if strings.ContainsRune(rv.String, 0) {
			return rv, cty.NilVal, fmt.Errorf("a %s value cannot contain a NUL character", t)
		}
		return rv, s, nil
	case host.RegMultiSZ:
		l, err := convert.Convert(v, cty.List(cty.String))
		if err != nil || l.IsNull() {
			return rv, cty.NilVal, fmt.Errorf("a %s value must be a list of strings", t)
		}
		rv.Strings = []string{}
		for i, el := range l.AsValueSlice() {
			s, ok := str(el)
			if !ok || s == "" || strings.ContainsRune(s, 0) {
				// An empty string would end the list early when stored.
				return rv, cty.NilVal, fmt.Errorf("element %d of a %s value must be a non-empty string without NUL", i, t)
			}
			rv.Strings = append(rv.Strings, s)
		}
		return rv, listVal(rv.Strings), nil
	case host.RegDWORD, host.RegQWORD:
		n, err := convert.Convert(v, cty.Number)
		if err != nil || n.IsNull() {
			return rv, cty.NilVal, fmt.Errorf("a %s value must be a whole number", t)
		}
		limit := uint64(math.MaxUint32)
		if t == host.RegQWORD {
			limit = math.MaxUint64
		}
		// IsInt first: big.Float.Uint64 reports 1.5 as exactly 1.
		bf := n.AsBigFloat()
		u, acc := bf.Uint64()
		if !bf.IsInt() || acc != big.Exact || bf.Sign() < 0 || u > limit {
			return rv, cty.NilVal, fmt.Errorf("a %s value must be a whole number from 0 to %d", t, limit)
		}
		rv.Integer = u
		return rv, cty.NumberUIntVal(u), nil
	case host.RegBinary:
		s, err := convert.Convert(v, cty.String)
		if err != nil || s.IsNull() {
			return rv, cty.NilVal, fmt.Errorf("a %s value must be a base64 string", t)
		}
		b, err := base64.StdEncoding.DecodeString(s.AsString())
		if err != nil {
			return rv, cty.NilVal, fmt.Errorf("a %s value must be standard base64: %v", t, err)
		}
		rv.Binary = b
		return rv, cty.StringVal(base64.StdEncoding.EncodeToString(b)), nil
	}
	return rv, cty.NilVal, fmt.Errorf("unknown type %s", t)
}

// regVal is an observed value in the canonical cty form.
func regVal(rv host.RegistryValue) cty.Value {
	switch rv.Type {
	case host.RegSZ, host.RegExpandSZ:
		return cty.StringVal(rv.String)
	case host.RegMultiSZ:
		return listVal(rv.Strings)
	case host.RegDWORD, host.RegQWORD:
		return cty.NumberUIntVal(rv.Integer)
	case host.RegBinary:
		return cty.StringVal(base64.StdEncoding.EncodeToString(rv.Binary))
	}
	return cty.StringVal(fmt.Sprintf("(%s data)", rv.Type))
}

func (Registry) Validate(req modules.ValidateRequest) hcl.Diagnostics {
	cfg := req.Config
	diags := validateEnum(cfg, "state", "present", "absent")
	if k, ok := str(get(cfg, "key")); ok {
		if _, why := normKey(k); why != "" {
			diags = append(diags, cfg.Error("key", "Invalid registry key", fmt.Sprintf("key %q %s.", k, why)))
		}
	}
	if n, ok := str(get(cfg, "name")); ok && (len(n) > 16383 || strings.ContainsRune(n, 0)) {
		diags = append(diags, cfg.Error("name", "Invalid value name", "name must be at most 16383 characters, without NUL."))
	}
	if isNull(get(cfg, "name")) {
		diags = append(diags, cfg.Error("name", "Null name", "name cannot be null; use \"\" for the key's default value."))
	}
	t, typeOK := str(get(cfg, "type"))
	rt, known := regType(t)
	if typeOK && !known {
		diags = append(diags, cfg.Error("type", "Invalid type",
			fmt.Sprintf("type must be REG_SZ, REG_EXPAND_SZ, REG_MULTI_SZ, REG_DWORD, REG_QWORD or REG_BINARY; got %q.", t)))
	}
	if state, ok := str(get(cfg, "state")); ok && state == "present" {
		v := get(cfg, "value")
		switch {
		case isNull(v):
			diags = append(diags, cfg.Error("value", "Missing value", "value is required unless state = \"absent\"."))
		case known && v.IsWhollyKnown():
			if _, _, err := decodeRegValue(rt, v); err != nil {
				diags = append(diags, cfg.Error("value", "Invalid value", err.Error()+"."))
			}
		}
	}
	return diags
}

// regSubject names a value for plans.
func regSubject(key, name string) string {
	if name == "" {
		return key + ` (default)`
	}
	return key + `\` + name
}

func (m Registry) Plan(ctx context.Context, req modules.PlanRequest) modules.PlanResponse {
	cfg := req.Config
	keyV, nameV := get(cfg, "key"), get(cfg, "name")
	rawKey, keyOK := str(keyV)
	name, nameOK := str(nameV)
	state, stateOK := str(get(cfg, "state"))
	t, typeOK := str(get(cfg, "type"))
	rt, _ := regType(t)
	key := rawKey
	if keyOK {
		key, _ = normKey(rawKey)
		keyV = cty.StringVal(key)
	}

	// The desired type and data as far as they are known.
	wantType, wantVal := cty.UnknownVal(cty.String), cty.DynamicVal
	switch {
	case stateOK && state == "absent":
		wantType, wantVal = cty.NullVal(cty.String), cty.NullVal(cty.DynamicPseudoType)
	case typeOK:
		wantType = cty.StringVal(string(rt))
		if v := get(cfg, "value"); v.IsWhollyKnown() {
			_, wantVal, _ = decodeRegValue(rt, v)
		}
	}
	res := result(registryResults, map[string]cty.Value{"key": keyV, "name": nameV, "type": wantType, "value": wantVal})

	if !keyOK || !nameOK || !stateOK {
		subject := knownAfterApply
		if keyOK && nameOK {
			subject = regSubject(key, name)
		}
		return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Update, Subject: subject, Fields: []modules.FieldChange{
			{Name: "type", Old: cty.UnknownVal(cty.String), New: wantType},
			{Name: "value", Old: cty.DynamicVal, New: wantVal},
		}}}
	}
	have, err := req.Host.RegistryGet(ctx, key, name)
	if err != nil {
		return modules.PlanResponse{Result: res, Diagnostics: hostError(cfg, "key", "Cannot read registry", err)}
	}
	subject := regSubject(key, name)
	if !have.Exists {
		if state == "absent" {
			return modules.PlanResponse{Result: res}
		}
		return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Create, Subject: subject, Fields: []modules.FieldChange{
			{Name: "type", Old: cty.NullVal(cty.String), New: wantType},
			{Name: "value", Old: cty.NullVal(cty.DynamicPseudoType), New: wantVal},
		}}}
	}
	haveType, haveVal := cty.StringVal(string(have.Type)), regVal(have)
	if state == "absent" {
		return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Delete, Subject: subject, Fields: []modules.FieldChange{
			{Name: "type", Old: haveType, New: wantType},
			{Name: "value", Old: haveVal, New: wantVal},
		}}}
	}
	var fields []modules.FieldChange
	if !typeOK || have.Type != rt {
		fields = append(fields, modules.FieldChange{Name: "type", Old: haveType, New: wantType})
	}
	if !wantVal.IsWhollyKnown() || !haveVal.Type().Equals(wantVal.Type()) || !haveVal.Equals(wantVal).True() {
		fields = append(fields, modules.FieldChange{Name: "value", Old: haveVal, New: wantVal})
	}
	if len(fields) == 0 {
		return modules.PlanResponse{Result: res}
	}
	return modules.PlanResponse{Result: res, Change: &modules.Change{Action: modules.Update, Subject: subject, Fields: fields}}
}

func (m Registry) Apply(ctx context.Context, req modules.ApplyRequest) modules.ApplyResponse {
	cfg := req.Config
	if diags := requireKnown(cfg, "key", "name", "type", "value", "state"); diags.HasErrors() {
		return modules.ApplyResponse{Result: unknownResult(registryResults), Diagnostics: diags}
	}
	rawKey, _ := str(get(cfg, "key"))
	key, _ := normKey(rawKey)
	name, _ := str(get(cfg, "name"))
	state, _ := str(get(cfg, "state"))
	t, _ := str(get(cfg, "type"))
	rt, _ := regType(t)
	h := req.Host
	res := result(registryResults, map[string]cty.Value{"key": cty.StringVal(key), "name": cty.StringVal(name)})
	fail := func(d hcl.Diagnostics) modules.ApplyResponse {
		return modules.ApplyResponse{Result: res, Diagnostics: d}
	}
	have, err := h.RegistryGet(ctx, key, name)
	if err != nil {
		return fail(hostError(cfg, "key", "Cannot read registry", err))
	}
	if state == "absent" {
		if have.Exists {
			if err := h.RegistryDelete(ctx, key, name); err != nil {
				return fail(hostError(cfg, "key", "Cannot delete registry value", err))
			}
		}
		return modules.ApplyResponse{Result: res}
	}
	want, wantVal, _ := decodeRegValue(rt, get(cfg, "value"))
	res = result(registryResults, map[string]cty.Value{"key": cty.StringVal(key), "name": cty.StringVal(name),
		"type": cty.StringVal(string(rt)), "value": wantVal})
	if have.Exists && have.Type == rt && regVal(have).Equals(wantVal).True() {
		return modules.ApplyResponse{Result: res}
	}
	if err := h.RegistrySet(ctx, key, name, want); err != nil {
		return fail(hostError(cfg, "key", "Cannot set registry value", err))
	}
	return modules.ApplyResponse{Result: res}
}
