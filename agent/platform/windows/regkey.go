package windows

import (
	"fmt"
	"strings"
)

// hive names a registry root key in its short form.
type hive string

const (
	hiveLocalMachine  hive = "HKLM"
	hiveCurrentUser   hive = "HKCU"
	hiveClassesRoot   hive = "HKCR"
	hiveUsers         hive = "HKU"
	hiveCurrentConfig hive = "HKCC"
)

var hiveNames = map[string]hive{
	"HKLM": hiveLocalMachine, "HKEY_LOCAL_MACHINE": hiveLocalMachine,
	"HKCU": hiveCurrentUser, "HKEY_CURRENT_USER": hiveCurrentUser,
	"HKCR": hiveClassesRoot, "HKEY_CLASSES_ROOT": hiveClassesRoot,
	"HKU": hiveUsers, "HKEY_USERS": hiveUsers,
	"HKCC": hiveCurrentConfig, "HKEY_CURRENT_CONFIG": hiveCurrentConfig,
}

// parseKey splits `HKLM\SYSTEM\...` into hive and subkey path. Hive names
// are case-insensitive, long or short, and may carry PowerShell's colon
// (HKLM:\...). The subkey loses leading and trailing backslashes; an empty
// one is the hive itself.
func parseKey(key string) (hive, string, error) {
	root, path, _ := strings.Cut(strings.TrimSpace(key), `\`)
	h, ok := hiveNames[strings.ToUpper(strings.TrimSuffix(root, ":"))]
	if !ok {
		return "", "", fmt.Errorf("registry key %q: must start with HKLM, HKCU, HKCR, HKU or HKCC (or the HKEY_... names)", key)
	}
	path = strings.Trim(path, `\`)
	if strings.Contains(path, `\\`) {
		return "", "", fmt.Errorf("registry key %q: empty key name", key)
	}
	return h, path, nil
}
