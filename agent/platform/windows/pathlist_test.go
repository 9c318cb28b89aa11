package windows

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestPathAdd(t *testing.T) {
	const sys = `%SystemRoot%\system32;%SystemRoot%;C:\Program Files\x\`
	for _, tc := range []struct {
		list, dir, want string
		changed         bool
	}{
		{sys, `C:\k`, sys + `;C:\k`, true},
		{sys + `;C:\k`, `C:\k`, sys + `;C:\k`, false},
		{sys + `;c:\K\`, `C:\k`, sys + `;c:\K\`, false},
		{sys + `;C:\k`, `c:\k\`, sys + `;C:\k`, false},
		{sys, `c:\program files\X`, sys, false},
		{``, `C:\k`, `C:\k`, true},
		{sys + `;`, `C:\k`, sys + `;C:\k`, true},
		{`C:\`, `C:`, `C:\;C:`, true}, // C: is the current directory on C:, not the root
	} {
		got, changed := pathAdd(tc.list, tc.dir)
		assert.Equal(t, tc.want, got, "%q + %q", tc.list, tc.dir)
		assert.Equal(t, tc.changed, changed, "%q + %q", tc.list, tc.dir)
	}
}

func TestPathRemove(t *testing.T) {
	for _, tc := range []struct {
		list, dir, want string
		changed         bool
	}{
		{`A;C:\k;B`, `C:\k`, `A;B`, true},
		{`A;c:\K\;B;C:\k`, `C:\k`, `A;B`, true},
		{`A;B`, `C:\k`, `A;B`, false},
		{`C:\k`, `C:\K\`, ``, true},
		{`A;;B;C:\k`, `C:\k`, `A;;B`, true},
	} {
		got, changed := pathRemove(tc.list, tc.dir)
		assert.Equal(t, tc.want, got, "%q - %q", tc.list, tc.dir)
		assert.Equal(t, tc.changed, changed, "%q - %q", tc.list, tc.dir)
	}
	assert.Error(t, checkPathDir(""))
	assert.Error(t, checkPathDir(`C:\a;C:\b`))
	assert.NoError(t, checkPathDir(`C:\k`))
}
