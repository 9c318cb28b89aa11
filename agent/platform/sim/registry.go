package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/wsu-project/wsu/host"
)

// hives maps every accepted hive spelling to its canonical name.
var hives = map[string]string{
	"HKLM": "HKEY_LOCAL_MACHINE", "HKEY_LOCAL_MACHINE": "HKEY_LOCAL_MACHINE",
	"HKCU": "HKEY_CURRENT_USER", "HKEY_CURRENT_USER": "HKEY_CURRENT_USER",
	"HKCR": "HKEY_CLASSES_ROOT", "HKEY_CLASSES_ROOT": "HKEY_CLASSES_ROOT",
	"HKU": "HKEY_USERS", "HKEY_USERS": "HKEY_USERS",
	"HKCC": "HKEY_CURRENT_CONFIG", "HKEY_CURRENT_CONFIG": "HKEY_CURRENT_CONFIG",
}

// envKey is where Windows keeps the machine environment.
const envKey = `HKLM\SYSTEM\CurrentControlSet\Control\Session Manager\Environment`

// regPath canonicalises a key: the hive's long name, backslashes only
// ('/' is a legal character in a key name). It returns the spelling to
// keep and the case-folded lookup key.
func regPath(key string) (path, id string, err error) {
	parts := strings.Split(strings.TrimSuffix(key, `\`), `\`)
	hive, ok := hives[strings.ToUpper(parts[0])]
	if !ok {
		return "", "", fmt.Errorf("registry key %q: unknown hive %q", key, parts[0])
	}
	if slices.Contains(parts[1:], "") {
		return "", "", fmt.Errorf("registry key %q: empty key name", key)
	}
	path = strings.Join(append([]string{hive}, parts[1:]...), `\`)
	return path, strings.ToLower(path), nil
}

// normalizeValue checks a value against its type and keeps only the field
// the type uses, so what is read back equals what was meant.
func normalizeValue(v host.RegistryValue) (host.RegistryValue, error) {
	out := host.RegistryValue{Exists: true, Type: v.Type}
	noNUL := func(s string) error {
		if strings.ContainsRune(s, 0) {
			return errors.New("string contains NUL")
		}
		return nil
	}
	switch v.Type {
	case host.RegSZ, host.RegExpandSZ:
		out.String = v.String
		return out, noNUL(v.String)
	case host.RegMultiSZ:
		for _, s := range v.Strings {
			// An empty string would end the list early on a real node.
			if s == "" {
				return out, errors.New("REG_MULTI_SZ cannot hold an empty string")
			}
			if err := noNUL(s); err != nil {
				return out, err
			}
		}
		out.Strings = slices.Clone(v.Strings)
	case host.RegDWORD:
		if v.Integer > math.MaxUint32 {
			return out, fmt.Errorf("REG_DWORD value %d does not fit in 32 bits", v.Integer)
		}
		out.Integer = v.Integer
	case host.RegQWORD:
		out.Integer = v.Integer
	case host.RegBinary:
		out.Binary = slices.Clone(v.Binary)
	default:
		return out, fmt.Errorf("unknown registry type %q", v.Type)
	}
	return out, nil
}

func (t *tx) regGet(key, name string) (host.RegistryValue, error) {
	_, id, err := regPath(key)
	if err != nil {
		return host.RegistryValue{}, err
	}
	r, err := t.registry()
	if err != nil {
		return host.RegistryValue{}, err
	}
	if k := r.Keys[id]; k != nil {
		if v := k.Values[strings.ToLower(name)]; v != nil {
			return v.Value, nil
		}
	}
	return host.RegistryValue{}, nil
}

func (t *tx) regSet(key, name string, v host.RegistryValue) error {
	path, id, err := regPath(key)
	if err != nil {
		return err
	}
	if v, err = normalizeValue(v); err != nil {
		return err
	}
	r, err := t.registry()
	if err != nil {
		return err
	}
	// Creating a key creates its parents, as RegCreateKeyEx does.
	parts := strings.Split(path, `\`)
	for i := 2; i <= len(parts); i++ {
		p := strings.Join(parts[:i], `\`)
		if r.Keys[strings.ToLower(p)] == nil {
			r.Keys[strings.ToLower(p)] = &regKey{Path: p, Values: map[string]*regValue{}}
		}
	}
	k := r.Keys[id]
	if old := k.Values[strings.ToLower(name)]; old != nil {
		name = old.Name // value names keep their first spelling
	}
	k.Values[strings.ToLower(name)] = &regValue{Name: name, Value: v}
	t.mark(tRegistry)
	return nil
}

// regDeleteTree removes key and every key under it, as deleting a service
// removes HKLM\SYSTEM\CurrentControlSet\Services\<name>.
func (t *tx) regDeleteTree(key string) error {
	_, id, err := regPath(key)
	if err != nil {
		return err
	}
	r, err := t.registry()
	if err != nil {
		return err
	}
	for k := range r.Keys {
		if k == id || strings.HasPrefix(k, id+`\`) {
			delete(r.Keys, k)
			t.mark(tRegistry)
		}
	}
	return nil
}

func (t *tx) regDelete(key, name string) error {
	_, id, err := regPath(key)
	if err != nil {
		return err
	}
	r, err := t.registry()
	if err != nil {
		return err
	}
	if k := r.Keys[id]; k != nil && k.Values[strings.ToLower(name)] != nil {
		delete(k.Values, strings.ToLower(name))
		t.mark(tRegistry)
	}
	return nil
}

// RegistryGet reads a value; a missing key or value is Exists=false.
func (h *Host) RegistryGet(ctx context.Context, key, name string) (host.RegistryValue, error) {
	if err := ctx.Err(); err != nil {
		return host.RegistryValue{}, err
	}
	var v host.RegistryValue
	err := h.view(func(t *tx) (err error) { v, err = t.regGet(key, name); return })
	if err != nil {
		return host.RegistryValue{}, fmt.Errorf("registry get %s\\%s: %w", key, name, err)
	}
	return v, nil
}

func (h *Host) RegistrySet(ctx context.Context, key, name string, v host.RegistryValue) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := h.update(func(t *tx) error { return t.regSet(key, name, v) }); err != nil {
		return fmt.Errorf("registry set %s\\%s: %w", key, name, err)
	}
	return nil
}

func (h *Host) RegistryDelete(ctx context.Context, key, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := h.update(func(t *tx) error { return t.regDelete(key, name) }); err != nil {
		return fmt.Errorf("registry delete %s\\%s: %w", key, name, err)
	}
	return nil
}

// seed gives a new root what a fresh Windows Server 2022 node has in the
// places playbooks look: the machine environment and the version key.
func (h *Host) seed() error {
	sz := func(s string) host.RegistryValue { return host.RegistryValue{Type: host.RegSZ, String: s} }
	esz := func(s string) host.RegistryValue { return host.RegistryValue{Type: host.RegExpandSZ, String: s} }
	const ver = `HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion`
	values := []struct {
		key, name string
		v         host.RegistryValue
	}{
		{envKey, "Path", esz(`%SystemRoot%\system32;%SystemRoot%;%SystemRoot%\System32\Wbem;%SYSTEMROOT%\System32\WindowsPowerShell\v1.0\;%SYSTEMROOT%\System32\OpenSSH\`)},
		{envKey, "ComSpec", esz(`%SystemRoot%\system32\cmd.exe`)},
		{envKey, "OS", sz("Windows_NT")},
		{envKey, "PATHEXT", sz(".COM;.EXE;.BAT;.CMD;.VBS;.VBE;.JS;.JSE;.WSF;.WSH;.MSC")},
		{envKey, "TEMP", esz(`%SystemRoot%\TEMP`)},
		{envKey, "TMP", esz(`%SystemRoot%\TEMP`)},
		{envKey, "windir", esz(`%SystemRoot%`)},
		{envKey, "NUMBER_OF_PROCESSORS", sz("2")},
		{envKey, "PROCESSOR_ARCHITECTURE", sz("AMD64")},
		{ver, "ProductName", sz("Windows Server 2022 Datacenter")},
		{ver, "CurrentBuild", sz("20348")},
		{ver, "CurrentBuildNumber", sz("20348")},
		{ver, "CurrentMajorVersionNumber", host.RegistryValue{Type: host.RegDWORD, Integer: 10}},
		{ver, "CurrentMinorVersionNumber", host.RegistryValue{Type: host.RegDWORD, Integer: 0}},
		{ver, "DisplayVersion", sz("21H2")},
		{ver, "InstallationType", sz("Server")},
		{ver, "SystemRoot", sz(`C:\Windows`)},
	}
	return h.update(func(t *tx) error {
		if err := t.seedBoot(time.Now()); err != nil {
			return err
		}
		r, err := t.registry()
		if err != nil || len(r.Keys) > 0 {
			return err // an existing root keeps its registry
		}
		for _, s := range values {
			if err := t.regSet(s.key, s.name, s.v); err != nil {
				return err
			}
		}
		// Every Windows host has the SCM's key, with or without services.
		r.Keys[strings.ToLower(servicesKey)] = &regKey{Path: servicesKey, Values: map[string]*regValue{}}
		return nil
	})
}
