package windows

import (
	"math/rand"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEscapeArg(t *testing.T) {
	for in, want := range map[string]string{
		``:                  `""`,
		`plain`:             `plain`,
		`C:\k\x.exe`:        `C:\k\x.exe`,
		`a b`:               `"a b"`,
		`C:\Program Files\`: `"C:\Program Files\\"`,
		`say "hi"`:          `"say \"hi\""`,
		`a\"b`:              `a\\\"b`,
		"tab\there":         "\"tab\there\"",
		`--x=C:\a b\c`:      `"--x=C:\a b\c"`,
	} {
		assert.Equal(t, want, escapeArg(in), "escapeArg(%q)", in)
	}
}

func TestCommandLineRoundTrip(t *testing.T) {
	exe := `C:\Program Files\wsu test\winsvc.exe`
	args := []string{"-service", "-marker", `C:\dir with spaces\marker.txt`, "", `quote"inside`,
		`trailing\`, `trailing space\ `, `\\server\share\`, `a\\"b`, "tab\tx", `""`}
	line := buildCommandLine(exe, args)
	gotExe, gotArgs := parseCommandLine(line)
	assert.Equal(t, exe, gotExe)
	assert.Equal(t, args, gotArgs)

	// Random arguments over the characters that matter.
	r := rand.New(rand.NewSource(1))
	alphabet := []byte(`ab \"\t\\`)
	for i := 0; i < 2000; i++ {
		args := make([]string, r.Intn(4))
		for j := range args {
			b := make([]byte, r.Intn(8))
			for k := range b {
				b[k] = alphabet[r.Intn(len(alphabet))]
			}
			args[j] = string(b)
		}
		gotExe, gotArgs := parseCommandLine(buildCommandLine(`C:\k\x.exe`, args))
		require.Equal(t, `C:\k\x.exe`, gotExe)
		if len(args) == 0 {
			args = nil
		}
		require.Equal(t, args, gotArgs, "line %q", buildCommandLine(`C:\k\x.exe`, args))
	}
}

func TestParseCommandLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		exe  string
		args []string
	}{
		{`C:\k\kubelet.exe --config=C:\k\kubelet.conf --v=2`, `C:\k\kubelet.exe`, []string{`--config=C:\k\kubelet.conf`, `--v=2`}},
		{`"C:\k\kubelet.exe"`, `C:\k\kubelet.exe`, nil},
		{`  "C:\a b\c.exe"  -x  "y z" `, `C:\a b\c.exe`, []string{"-x", "y z"}},
		// Unquoted path with spaces, as some installers write it.
		{`C:\Program Files\x\y.exe -a "b c"`, `C:\Program Files\x\y.exe`, []string{"-a", "b c"}},
		{`C:\Program Files (x86)\x\y.EXE`, `C:\Program Files (x86)\x\y.EXE`, nil},
		// An extensionless program whose argument names an .exe stays put.
		{`C:\k\tool --out=C:\x.exe`, `C:\k\tool`, []string{`--out=C:\x.exe`}},
		{`C:\k\tool -run C:\x.exe`, `C:\k\tool`, []string{"-run", `C:\x.exe`}},
		{`C:\Windows\System32\svchost.exe -k netsvcs -p`, `C:\Windows\System32\svchost.exe`, []string{"-k", "netsvcs", "-p"}},
		// "" inside quotes is a literal quote (and ends the quoted part).
		{`x.exe "a""b"`, `x.exe`, []string{`a"b`}},
		{`x.exe a\\\"b c\\d`, `x.exe`, []string{`a\"b`, `c\\d`}},
		{``, ``, nil},
	} {
		exe, args := parseCommandLine(tc.line)
		assert.Equal(t, tc.exe, exe, "line %q", tc.line)
		assert.Equal(t, tc.args, args, "line %q", tc.line)
	}
}
