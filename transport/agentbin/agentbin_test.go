package agentbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var win = Platform{OS: "windows", Arch: "amd64"}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestFileName(t *testing.T) {
	assert.Equal(t, "wsu-agent-windows-amd64.exe", FileName(win))
	assert.Equal(t, "wsu-agent-linux-arm64", FileName(Platform{"linux", "arm64"}))
}

// The embedded build comes first, then the file beside the CLI, then the
// CLI itself for its own platform.
func TestForOrder(t *testing.T) {
	dir := t.TempDir()
	beside := filepath.Join(dir, FileName(win))
	require.NoError(t, os.WriteFile(beside, []byte("beside"), 0o755))
	embedded := fstest.MapFS{FileName(win): {Data: []byte("embedded")}}

	b, err := New(Options{Embedded: embedded, Dir: dir}).For(win)
	require.NoError(t, err)
	assert.Equal(t, FileName(win), b.Name())
	got, err := b.SHA256()
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("embedded")), got)

	b, err = New(Options{Embedded: fstest.MapFS{}, Dir: dir}).For(win)
	require.NoError(t, err)
	assert.Equal(t, beside, b.Name())
	got, err = b.SHA256()
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("beside")), got)

	self := filepath.Join(dir, "wsu")
	b, err = New(Options{Dir: t.TempDir(), Self: self}).For(Native())
	require.NoError(t, err)
	assert.Equal(t, self, b.Name(), "the CLI serves its own platform")
}

func TestForMissing(t *testing.T) {
	dir := t.TempDir()
	other := Platform{OS: "plan9", Arch: "386"}
	_, err := New(Options{Dir: dir, Self: "/usr/bin/wsu"}).For(other)
	require.Error(t, err, "the CLI is no agent for another platform")
	assert.Contains(t, err.Error(), "carries no agent for plan9/386")
	assert.Contains(t, err.Error(), filepath.Join(dir, "wsu-agent-plan9-386")+" is missing")
	assert.Contains(t, err.Error(), "GOOS=plan9 GOARCH=386 go build")
	assert.Contains(t, err.Error(), "wsu_agent_binary")

	var none *Source
	_, err = none.For(win)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set wsu_agent_binary")
	exe, err := none.Local()
	require.NoError(t, err)
	assert.Empty(t, exe, "no agent to start: the local transport serves in-process")
}

// One Source hands out one Binary per build and per file, so a run hashes
// each once; another Source (another run) has its own.
func TestOneBinaryPerSource(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.exe")
	require.NoError(t, os.WriteFile(p, []byte("v1"), 0o755))
	s := New(Options{Dir: dir})
	a, b := s.File(p), s.File(p)
	assert.Same(t, a, b)
	r, err := s.Resolve(p, win)
	require.NoError(t, err)
	assert.Same(t, a, r, "wsu_agent_binary names the same file")
	first, err := a.SHA256()
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("v1")), first)

	require.NoError(t, os.WriteFile(p, []byte("v2"), 0o755))
	again, err := a.SHA256()
	require.NoError(t, err)
	assert.Equal(t, first, again, "the sum is computed once per Binary")
	fresh, err := New(Options{}).File(p).SHA256()
	require.NoError(t, err)
	assert.Equal(t, sum([]byte("v2")), fresh, "another Source hashes again")

	b1, err := s.For(win)
	require.Error(t, err)
	assert.Nil(t, b1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName(win)), []byte("w"), 0o755))
	b1, err = s.For(win)
	require.NoError(t, err)
	b2, err := s.For(win)
	require.NoError(t, err)
	assert.Same(t, b1, b2)
}

func TestOpen(t *testing.T) {
	for name, b := range map[string]*Binary{
		"bytes": Bytes("x", []byte("content")),
		"file": func() *Binary {
			p := filepath.Join(t.TempDir(), "f")
			require.NoError(t, os.WriteFile(p, []byte("content"), 0o644))
			return File(p)
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			r, n, err := b.Open()
			require.NoError(t, err)
			defer r.Close()
			got, err := io.ReadAll(r)
			require.NoError(t, err)
			assert.Equal(t, "content", string(got))
			assert.Equal(t, int64(7), n)
		})
	}
	_, _, err := File(filepath.Join(t.TempDir(), "missing")).Open()
	require.Error(t, err)
}

func TestExecutable(t *testing.T) {
	dir := t.TempDir()
	b := Bytes("wsu-agent-windows-amd64.exe", []byte("MZ agent"))
	p, err := b.Executable(dir)
	require.NoError(t, err)
	s, _ := b.SHA256()
	assert.Equal(t, filepath.Join(dir, "wsu-agent-windows-amd64-"+s[:12]+".exe"), p)
	got, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "MZ agent", string(got))
	fi, err := os.Stat(p)
	require.NoError(t, err)
	assert.NotZero(t, fi.Mode()&0o100, "executable")
	leftovers, _ := filepath.Glob(filepath.Join(dir, ".*"))
	assert.Empty(t, leftovers, "no temp file left")

	f := File("/opt/agent")
	p, err = f.Executable("")
	require.NoError(t, err)
	assert.Equal(t, "/opt/agent", p, "a file runs where it is")

	_, err = Bytes("x", nil).Executable("")
	require.Error(t, err)
}

// An embedded build takes its sum from the record make writes beside it
// (so a run does not read and hash it), unless the record's size is not
// the build's: then, or without a record, the content is hashed.
func TestEmbeddedSum(t *testing.T) {
	content := []byte("agent build")
	name := FileName(win)
	recorded := sum([]byte("what make recorded"))
	for _, tc := range []struct {
		name   string
		record string // "": none
		want   string
	}{
		{"recorded", recorded + " 11\n", recorded},
		{"no record", "", sum(content)},
		{"size differs", recorded + " 12\n", sum(content)},
		{"not a sum", "abc 11\n", sum(content)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{name: {Data: content}}
			if tc.record != "" {
				fsys[name+".sha256"] = &fstest.MapFile{Data: []byte(tc.record)}
			}
			b, err := New(Options{Embedded: fsys}).For(win)
			require.NoError(t, err)
			assert.True(t, b.InMemory())
			got, err := b.SHA256()
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// An embedded build is streamed from the program's image when sent, and
// written out whole to be run.
func TestEmbeddedContent(t *testing.T) {
	name := FileName(win)
	b := Embedded(fstest.MapFS{name: {Data: []byte("MZ agent")}}, name)
	r, n, err := b.Open()
	require.NoError(t, err)
	got, err := io.ReadAll(r)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.Equal(t, "MZ agent", string(got))
	assert.Equal(t, int64(8), n)

	p, err := b.Executable(t.TempDir())
	require.NoError(t, err)
	exe, err := os.ReadFile(p)
	require.NoError(t, err)
	assert.Equal(t, "MZ agent", string(exe))
}

// BenchmarkEmbeddedSum is what one run pays to learn the sum of an
// embedded agent the size of the linux/amd64 build: "recorded" reads the
// record make writes, "hashed" streams the content through sha256 (no
// record), "copied" is how it was done before the record: the content read
// into memory, then hashed.
func BenchmarkEmbeddedSum(b *testing.B) {
	content := make([]byte, 3_743_906)
	name := FileName(win)
	for _, bc := range []struct {
		name           string
		record, copied bool
	}{{"recorded", true, false}, {"hashed", false, false}, {"copied", false, true}} {
		b.Run(bc.name, func(b *testing.B) {
			fsys := fstest.MapFS{name: {Data: content}}
			if bc.record {
				fsys[name+".sha256"] = &fstest.MapFile{Data: fmt.Appendf(nil, "%s %d\n", sum(content), len(content))}
			}
			for b.Loop() {
				bin, err := New(Options{Embedded: fsys}).For(win)
				if bc.copied {
					var data []byte
					if data, err = fs.ReadFile(fsys, name); err == nil {
						bin = Bytes(name, data)
					}
				}
				if err == nil {
					_, err = bin.SHA256()
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
