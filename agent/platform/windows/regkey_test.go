package windows

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		hive hive
		path string
	}{
		{`HKLM\SYSTEM\CurrentControlSet\Services`, hiveLocalMachine, `SYSTEM\CurrentControlSet\Services`},
		{`HKEY_LOCAL_MACHINE\SOFTWARE\wsu\`, hiveLocalMachine, `SOFTWARE\wsu`},
		{`hklm:\Software`, hiveLocalMachine, `Software`},
		{`HKCU\Environment`, hiveCurrentUser, `Environment`},
		{`HKEY_CURRENT_USER\x`, hiveCurrentUser, `x`},
		{`HKCR\.txt`, hiveClassesRoot, `.txt`},
		{`HKEY_CLASSES_ROOT\CLSID`, hiveClassesRoot, `CLSID`},
		{`HKU\.DEFAULT\Environment`, hiveUsers, `.DEFAULT\Environment`},
		{`HKEY_USERS\S-1-5-18`, hiveUsers, `S-1-5-18`},
		{`HKCC\System`, hiveCurrentConfig, `System`},
		{`HKEY_CURRENT_CONFIG\Software`, hiveCurrentConfig, `Software`},
		{`HKLM`, hiveLocalMachine, ``},
		{`HKLM\Software\MIME/Database`, hiveLocalMachine, `Software\MIME/Database`},
	} {
		h, p, err := parseKey(tc.key)
		require.NoError(t, err, tc.key)
		assert.Equal(t, tc.hive, h, tc.key)
		assert.Equal(t, tc.path, p, tc.key)
	}
	for _, bad := range []string{``, `SOFTWARE\x`, `HKXX\a`, `HKLM/SOFTWARE`, `HKLM\a\\b`, `\HKLM\a`} {
		_, _, err := parseKey(bad)
		assert.Error(t, err, bad)
	}
}
