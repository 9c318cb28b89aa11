//go:build windows

package windows

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"unsafe"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/registry"

	"github.com/wsu-project/wsu/host"
)

func rootKey(h hive) registry.Key {
	switch h {
	case hiveCurrentUser:
		return registry.CURRENT_USER
	case hiveClassesRoot:
		return registry.CLASSES_ROOT
	case hiveUsers:
		return registry.USERS
	case hiveCurrentConfig:
		return registry.CURRENT_CONFIG
	}
	return registry.LOCAL_MACHINE
}

func (h *winHost) RegistryGet(ctx context.Context, key, name string) (host.RegistryValue, error) {
	if err := ctx.Err(); err != nil {
		return host.RegistryValue{}, err
	}
	hv, path, err := parseKey(key)
	if err != nil {
		return host.RegistryValue{}, err
	}
	k, err := registry.OpenKey(rootKey(hv), path, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return host.RegistryValue{}, nil
	}
	if err != nil {
		return host.RegistryValue{}, fmt.Errorf("registry %s: %w", key, err)
	}
	defer k.Close()
	v, err := readValue(k, name)
	if err != nil {
		return host.RegistryValue{}, fmt.Errorf("registry %s\\%s: %w", key, name, err)
	}
	return v, nil
}

var typeNames = map[uint32]host.RegistryType{
	registry.SZ:        host.RegSZ,
	registry.EXPAND_SZ: host.RegExpandSZ,
	registry.MULTI_SZ:  host.RegMultiSZ,
	registry.DWORD:     host.RegDWORD,
	registry.QWORD:     host.RegQWORD,
	registry.BINARY:    host.RegBinary,
	// The rest are rare; their raw bytes come back in Binary.
	registry.NONE:                       "REG_NONE",
	registry.DWORD_BIG_ENDIAN:           "REG_DWORD_BIG_ENDIAN",
	registry.LINK:                       "REG_LINK",
	registry.RESOURCE_LIST:              "REG_RESOURCE_LIST",
	registry.FULL_RESOURCE_DESCRIPTOR:   "REG_FULL_RESOURCE_DESCRIPTOR",
	registry.RESOURCE_REQUIREMENTS_LIST: "REG_RESOURCE_REQUIREMENTS_LIST",
}

func readValue(k registry.Key, name string) (host.RegistryValue, error) {
	n, typ, err := k.GetValue(name, nil)
	if errors.Is(err, registry.ErrNotExist) {
		return host.RegistryValue{}, nil
	}
	if err != nil {
		return host.RegistryValue{}, err
	}
	v := host.RegistryValue{Exists: true, Type: typeNames[typ]}
	if v.Type == "" {
		v.Type = host.RegistryType(fmt.Sprintf("REG_TYPE_%d", typ))
	}
	switch typ {
	case registry.SZ, registry.EXPAND_SZ:
		// Unexpanded: %SystemRoot% stays as written.
		v.String, _, err = k.GetStringValue(name)
	case registry.MULTI_SZ:
		v.Strings, _, err = k.GetStringsValue(name)
	case registry.DWORD, registry.QWORD:
		v.Integer, _, err = k.GetIntegerValue(name)
	case registry.BINARY:
		v.Binary, _, err = k.GetBinaryValue(name)
	default:
		buf := make([]byte, n)
		n, _, err = k.GetValue(name, buf)
		v.Binary = buf[:min(n, len(buf))]
	}
	return v, err
}

func (h *winHost) RegistrySet(ctx context.Context, key, name string, v host.RegistryValue) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	hv, path, err := parseKey(key)
	if err != nil {
		return err
	}
	if err := checkValue(v); err != nil {
		return fmt.Errorf("registry %s\\%s: %w", key, name, err)
	}
	// CreateKey makes the missing keys along the path too.
	k, _, err := registry.CreateKey(rootKey(hv), path, registry.SET_VALUE)
	if err != nil {
		return fmt.Errorf("registry %s: %w", key, err)
	}
	defer k.Close()
	if err := writeValue(k, name, v); err != nil {
		return fmt.Errorf("registry %s\\%s: %w", key, name, err)
	}
	return nil
}

func checkValue(v host.RegistryValue) error {
	switch v.Type {
	case host.RegDWORD:
		if v.Integer > math.MaxUint32 {
			return fmt.Errorf("%d does not fit a REG_DWORD", v.Integer)
		}
	case host.RegMultiSZ:
		for _, s := range v.Strings {
			// An empty string would end the list early.
			if s == "" {
				return errors.New("REG_MULTI_SZ cannot hold an empty string")
			}
		}
	case host.RegSZ, host.RegExpandSZ, host.RegQWORD, host.RegBinary:
	default:
		return fmt.Errorf("unsupported value type %q (REG_SZ, REG_EXPAND_SZ, REG_MULTI_SZ, REG_DWORD, REG_QWORD, REG_BINARY)", v.Type)
	}
	return nil
}

func writeValue(k registry.Key, name string, v host.RegistryValue) error {
	switch v.Type {
	case host.RegSZ:
		return k.SetStringValue(name, v.String)
	case host.RegExpandSZ:
		return k.SetExpandStringValue(name, v.String)
	case host.RegMultiSZ:
		return k.SetStringsValue(name, v.Strings)
	case host.RegDWORD:
		return k.SetDWordValue(name, uint32(v.Integer))
	case host.RegQWORD:
		return k.SetQWordValue(name, v.Integer)
	case host.RegBinary:
		return k.SetBinaryValue(name, v.Binary)
	}
	return fmt.Errorf("unsupported value type %q", v.Type)
}

func (h *winHost) RegistryDelete(ctx context.Context, key, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	hv, path, err := parseKey(key)
	if err != nil {
		return err
	}
	k, err := registry.OpenKey(rootKey(hv), path, registry.SET_VALUE)
	if errors.Is(err, registry.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("registry %s: %w", key, err)
	}
	defer k.Close()
	if err := k.DeleteValue(name); err != nil && !errors.Is(err, registry.ErrNotExist) {
		return fmt.Errorf("registry %s\\%s: %w", key, name, err)
	}
	return nil
}

// envKey holds the machine environment: what new processes and services get.
const envKey = `SYSTEM\CurrentControlSet\Control\Session Manager\Environment`

func checkEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return fmt.Errorf("invalid environment variable name %q", name)
	}
	return nil
}

func (h *winHost) EnvGet(ctx context.Context, name string) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	if err := checkEnvName(name); err != nil {
		return "", false, err
	}
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, envKey, registry.QUERY_VALUE)
	if err != nil {
		return "", false, fmt.Errorf("machine environment: %w", err)
	}
	defer k.Close()
	s, _, err := k.GetStringValue(name)
	if errors.Is(err, registry.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("machine environment %s: %w", name, err)
	}
	return s, true, nil
}

func (h *winHost) EnvSet(ctx context.Context, name, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkEnvName(name); err != nil {
		return err
	}
	h.envMu.Lock()
	defer h.envMu.Unlock()
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, envKey, registry.QUERY_VALUE|registry.SET_VALUE)
	if err != nil {
		return fmt.Errorf("machine environment: %w", err)
	}
	defer k.Close()
	old, typ, err := k.GetStringValue(name)
	exists := err == nil
	if err != nil && !errors.Is(err, registry.ErrNotExist) && !errors.Is(err, registry.ErrUnexpectedType) {
		return fmt.Errorf("machine environment %s: %w", name, err)
	}
	// Keep an existing REG_EXPAND_SZ (Path is one); a new value with %VAR%
	// references needs one to be expanded.
	expand := (exists && typ == registry.EXPAND_SZ) || (!exists && strings.Contains(value, "%"))
	if exists && old == value {
		return nil
	}
	if err := setEnvValue(k, name, value, expand); err != nil {
		return fmt.Errorf("machine environment %s: %w", name, err)
	}
	setProcessEnv(name, value)
	broadcastEnvChange()
	return nil
}

func (h *winHost) EnvDelete(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkEnvName(name); err != nil {
		return err
	}
	h.envMu.Lock()
	defer h.envMu.Unlock()
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, envKey, registry.SET_VALUE)
	if err != nil {
		return fmt.Errorf("machine environment: %w", err)
	}
	defer k.Close()
	err = k.DeleteValue(name)
	if errors.Is(err, registry.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("machine environment %s: %w", name, err)
	}
	os.Unsetenv(name)
	broadcastEnvChange()
	return nil
}

func (h *winHost) PathAdd(ctx context.Context, dir string) (bool, error) {
	return h.editPath(ctx, dir, pathAdd)
}

func (h *winHost) PathRemove(ctx context.Context, dir string) (bool, error) {
	return h.editPath(ctx, dir, pathRemove)
}

// editPath applies edit to the machine Path and, so that the agent's own
// later Run calls see it, to the process's Path.
func (h *winHost) editPath(ctx context.Context, dir string, edit func(list, dir string) (string, bool)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkPathDir(dir); err != nil {
		return false, fmt.Errorf("machine PATH: %w", err)
	}
	h.envMu.Lock()
	defer h.envMu.Unlock()
	k, err := registry.OpenKey(registry.LOCAL_MACHINE, envKey, registry.QUERY_VALUE|registry.SET_VALUE)
	if err != nil {
		return false, fmt.Errorf("machine environment: %w", err)
	}
	defer k.Close()
	list, typ, err := k.GetStringValue("Path")
	if errors.Is(err, registry.ErrNotExist) {
		list, typ = "", registry.EXPAND_SZ
	} else if err != nil {
		return false, fmt.Errorf("machine PATH: %w", err)
	}
	list, changed := edit(list, dir)
	if !changed {
		return false, nil
	}
	if err := setEnvValue(k, "Path", list, typ == registry.EXPAND_SZ); err != nil {
		return false, fmt.Errorf("machine PATH: %w", err)
	}
	if expanded, err := registry.ExpandString(dir); err == nil {
		if p, ok := edit(os.Getenv("Path"), expanded); ok {
			os.Setenv("Path", p)
		}
	}
	broadcastEnvChange()
	return true, nil
}

func setEnvValue(k registry.Key, name, value string, expand bool) error {
	if expand {
		return k.SetExpandStringValue(name, value)
	}
	return k.SetStringValue(name, value)
}

// setProcessEnv mirrors a machine variable into the agent's environment,
// which Run passes on: a later task sees what an earlier one set.
func setProcessEnv(name, value string) {
	if expanded, err := registry.ExpandString(value); err == nil {
		value = expanded
	}
	os.Setenv(name, value)
}

var (
	user32                  = windows.NewLazySystemDLL("user32.dll")
	procSendMessageTimeoutW = user32.NewProc("SendMessageTimeoutW")
)

// broadcastEnvChange tells running programs (Explorer, mostly) to reload the
// environment, as setx does. Best effort: nothing depends on it, and a
// session without windows has no one to tell.
func broadcastEnvChange() {
	if procSendMessageTimeoutW.Find() != nil {
		return
	}
	const (
		hwndBroadcast    = 0xffff
		wmSettingChange  = 0x001A
		smtoAbortIfHung  = 0x0002
		broadcastTimeout = 1000 // ms per window
	)
	env, _ := windows.UTF16PtrFromString("Environment")
	var result uintptr
	procSendMessageTimeoutW.Call(hwndBroadcast, wmSettingChange, 0, uintptr(unsafe.Pointer(env)),
		smtoAbortIfHung, broadcastTimeout, uintptr(unsafe.Pointer(&result)))
}
