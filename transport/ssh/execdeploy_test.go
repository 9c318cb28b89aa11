//go:build linux

package ssh

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/notify"
	sshdtest "github.com/wsu-project/wsu/test/sshd"
)

// newRigWith is newRig with sshd options (NoSFTP: a host without the sftp
// subsystem).
func newRigWith(t *testing.T, opts sshdtest.Options) *rig {
	t.Helper()
	r := &rig{srv: sshdtest.StartWith(t, opts), dir: t.TempDir()}
	r.key = sshdtest.NewKey(t, r.dir, sshdtest.KeyOptions{})
	r.srv.Authorize(t, r.key.Public)
	r.knownHosts = filepath.Join(r.dir, "known_hosts")
	r.srv.AppendKnownHosts(t, r.knownHosts)
	return r
}

// noTemps fails when an upload left a temp file in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		assert.NotContains(t, e.Name(), ".wsu-upload-", "a temp file was left in %s", dir)
	}
}

func TestExecDeployWithoutSFTP(t *testing.T) {
	r := newRigWith(t, sshdtest.Options{NoSFTP: true})
	ctx := testCtx(t, 3*time.Minute)
	bin := agentBinary(t)
	want, _ := fileSHA256Uncached(bin)
	fi, err := os.Stat(bin)
	require.NoError(t, err)
	agentPath := filepath.Join(r.dir, "agent", "wsu-test")

	// The agent is missing: deployed through exec (and the user warned),
	// and a whole session works.
	got0 := newNotices()
	hh, err := Dial(notify.With(ctx, got0.add), "win01", r.vars(t, nil))
	require.NoError(t, err)
	h := hh.(*Host)
	assert.Equal(t, "exec", h.AgentDeployMethod())
	assert.Contains(t, h.AgentDeployNote(), "through an exec session")
	if ns := got0.get(); assert.Len(t, ns, 1) {
		assert.Equal(t, notify.Warning, ns[0].Kind)
		assert.Equal(t, h.AgentDeployNote(), ns[0].Summary)
	}
	assert.Contains(t, h.AgentDeployNote(), "is the sftp subsystem enabled in sshd_config?")
	assert.Equal(t, want, h.Hello().AgentSHA256)
	assert.Equal(t, fi.Size(), h.Counters().AgentBytes)
	got, err := fileSHA256Uncached(agentPath)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	st, err := os.Stat(agentPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	noTemps(t, filepath.Dir(agentPath))

	f, err := h.Facts(ctx)
	require.NoError(t, err)
	assert.Equal(t, "sim-host", f.Hostname)
	content := randomBytes(1<<20+3, 11)
	require.NoError(t, h.MkdirAll(ctx, `C:\k`, 0o755))
	require.NoError(t, h.WriteFile(ctx, `C:\k\blob.bin`, bytes.NewReader(content), 0o644))
	back, err := h.ReadFile(ctx, `C:\k\blob.bin`, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(content, back))
	res, err := h.Run(ctx, host.RunRequest{Argv: []string{"sh", "-c", "echo hi"}})
	require.NoError(t, err)
	assert.Equal(t, "hi\n", string(res.Stdout))
	require.NoError(t, h.Close())

	// Another build in place (it starts and answers with the wrong sum):
	// replaced the same way.
	b, err := os.ReadFile(bin)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(agentPath, append(b, "another build"...), 0o755))
	hh, err = Dial(ctx, "win01", r.vars(t, nil))
	require.NoError(t, err)
	h = hh.(*Host)
	assert.Equal(t, "exec", h.AgentDeployMethod())
	assert.Equal(t, want, h.Hello().AgentSHA256)
	got, err = fileSHA256Uncached(agentPath)
	require.NoError(t, err)
	assert.Equal(t, want, got, "the other build was replaced")
	_, err = h.Stat(ctx, `C:\k\blob.bin`)
	require.NoError(t, err)
	require.NoError(t, h.Close())

	// Current: nothing is uploaded.
	hh, err = Dial(ctx, "win01", r.vars(t, nil))
	require.NoError(t, err)
	assert.Equal(t, "", hh.(*Host).AgentDeployMethod())
	assert.Equal(t, "", hh.(*Host).AgentDeployNote())
	assert.Equal(t, int64(0), hh.(*Host).Counters().AgentBytes)
	require.NoError(t, hh.Close())
	noTemps(t, filepath.Dir(agentPath))
}

// TestSFTPDeployIsPreferred: with the subsystem there, the agent goes over
// SFTP, as before.
func TestSFTPDeployIsPreferred(t *testing.T) {
	r := newRig(t)
	hh, err := Dial(testCtx(t, 2*time.Minute), "win01", r.vars(t, nil))
	require.NoError(t, err)
	defer hh.Close()
	assert.Equal(t, "sftp", hh.(*Host).AgentDeployMethod())
	assert.Contains(t, hh.(*Host).AgentDeployNote(), "over SFTP")
}

// failingReader returns n bytes of data, then an error: a cut upload.
type failingReader struct {
	data []byte
	n    int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("injected: the connection was cut")
	}
	k := copy(p, f.data[:min(len(f.data), f.n, len(p))])
	f.data, f.n = f.data[k:], f.n-k
	return k, nil
}

// TestExecUploadCut: an upload that stops early leaves the target as it
// was (the command counts the bytes before it renames) and no temp file.
func TestExecUploadCut(t *testing.T) {
	r := newRigWith(t, sshdtest.Options{NoSFTP: true})
	ctx := testCtx(t, time.Minute)
	c, err := connect(ctx, r.config(t, nil))
	require.NoError(t, err)
	defer c.Close()
	dir := filepath.Join(r.dir, "cut")
	target := filepath.Join(dir, "wsu-test")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	old := []byte("the old binary")
	require.NoError(t, os.WriteFile(target, old, 0o755))

	data := randomBytes(8<<20, 3)
	_, err = execUpload(ctx, c, "linux", &failingReader{data: data, n: 3 << 20}, int64(len(data)), target)
	require.Error(t, err)
	// The stream ended early, so the command's byte count failed.
	assert.Eventually(t, func() bool {
		entries, _ := os.ReadDir(dir)
		return len(entries) == 1
	}, 20*time.Second, 50*time.Millisecond, "the temp file is removed")
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, old, got, "the target is untouched")

	// A complete one replaces it, creating missing directories.
	deep := filepath.Join(dir, "a", "b", "wsu-test")
	for _, p := range []string{target, deep} {
		n, err := execUpload(ctx, c, "linux", bytes.NewReader(data), int64(len(data)), p)
		require.NoError(t, err)
		assert.Equal(t, int64(len(data)), n)
		got, err = os.ReadFile(p)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(data, got))
		noTemps(t, filepath.Dir(p))
	}

	// The remote side failing (the parent is a file) is reported with
	// what it wrote.
	_, err = execUpload(ctx, c, "linux", bytes.NewReader(data[:10]), 10, filepath.Join(target, "x"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the upload command failed")
	assert.Contains(t, err.Error(), "mkdir")
}

func decodeEncodedCommand(t *testing.T, line string) string {
	t.Helper()
	const prefix = "powershell.exe -NoProfile -NonInteractive -EncodedCommand "
	require.True(t, strings.HasPrefix(line, prefix), line)
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(line, prefix))
	require.NoError(t, err)
	require.Zero(t, len(b)%2)
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}

// TestExecUploadCommandWindows: the line holds nothing cmd and PowerShell
// read differently (no quotes, $, %, ^, `, ;, &, |, <, >, parentheses or
// braces): only words of letters, digits, - . and base64's + / =. The
// script inside is PowerShell's alone.
func TestExecUploadCommandWindows(t *testing.T) {
	target := `C:\k\wsu\wsu-1.2.3+dev.exe`
	line := execUploadCommand("windows", target, 123456)
	assert.Regexp(t, regexp.MustCompile(`^[A-Za-z0-9.+/= -]+$`), line)
	assert.Less(t, len(line), 8000, "cmd.exe's command line limit is 8191")
	script := decodeEncodedCommand(t, line)
	assert.Equal(t, windowsUploadScript(target, 123456), script)
	for _, want := range []string{
		`$p='C:\k\wsu\wsu-1.2.3+dev.exe'`,
		"FromBase64Transform",
		"[Console]::OpenStandardInput()",
		"$o.Flush($true)",
		"if($o.Length -ne 123456)",
		"Move-Item -Force -LiteralPath $t -Destination $p",
		"Remove-Item -Force -LiteralPath $t",
	} {
		assert.Contains(t, script, want)
	}
	// The temp file is beside the target, so the rename stays on one
	// volume.
	assert.Contains(t, script, "$t=[IO.Path]::Combine($d,")
	assert.Equal(t, 1, strings.Count(script, "'C:"), "the path is in single quotes once: %s", script)
	assert.Equal(t, 1, strings.Count(script, target))
}

func TestExecUploadCommandLinux(t *testing.T) {
	line := execUploadCommand("linux", ".wsu/wsu-1.2.3", 42)
	re := regexp.MustCompile(`^trap '' PIPE HUP; mkdir -p \.wsu && umask 077 && cat > (\.wsu/\.wsu-1\.2\.3\.wsu-upload-[0-9a-f]{12}) && .*\[ \$n -ne 42 \].* && chmod 0755 (\S+) && \{ sync (\S+) 2>/dev/null; mv -f (\S+) \.wsu/wsu-1\.2\.3; \} \|\| \{ rm -f (\S+); exit 1; \}$`)
	m := re.FindStringSubmatch(line)
	require.NotNil(t, m, line)
	for _, tmp := range m[2:] {
		assert.Equal(t, m[1], tmp)
	}
	assert.Contains(t, execUploadCommand("linux", "wsu", 1), "; mkdir -p . && ")
}
