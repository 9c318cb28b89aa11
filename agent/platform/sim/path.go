package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// winPath is a parsed absolute Windows path.
type winPath struct {
	drive byte     // upper case
	parts []string // cleaned components below the drive root
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// parsePath accepts C:\k\x, C:/k/x, c:\k\x, the SFTP form /C:/k/x and the
// Win32 long-path form \\?\C:\k\x. Relative, drive-relative (C:x), UNC and
// drive-escaping paths are errors, as are characters Windows forbids in a
// file name.
func parsePath(p string) (winPath, error) {
	bad := func(why string) (winPath, error) {
		return winPath{}, fmt.Errorf("path %q: %s", p, why)
	}
	if p == "" {
		return bad("empty path")
	}
	s := strings.ReplaceAll(p, "/", `\`)
	sftp := false
	switch {
	case strings.HasPrefix(s, `\\?\`):
		s = s[4:]
	case strings.HasPrefix(s, `\\`):
		return bad("UNC paths are not supported")
	case len(s) >= 3 && s[0] == '\\' && isLetter(s[1]) && s[2] == ':':
		s, sftp = s[1:], true
	}
	if len(s) < 2 || !isLetter(s[0]) || s[1] != ':' {
		return bad("not an absolute Windows path")
	}
	if len(s) == 2 && sftp {
		s += `\` // SFTP's /C: is the drive root
	}
	if len(s) == 2 || s[2] != '\\' {
		return bad("drive-relative paths are not supported")
	}
	w := winPath{drive: s[0] &^ 0x20}
	for _, c := range strings.Split(s[3:], `\`) {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(w.parts) == 0 {
				return bad("escapes the drive root")
			}
			w.parts = w.parts[:len(w.parts)-1]
			continue
		}
		if strings.ContainsAny(c, `<>:"|?*`) || strings.ContainsFunc(c, func(r rune) bool { return r < 32 }) {
			return bad(fmt.Sprintf("invalid file name %q", c))
		}
		w.parts = append(w.parts, c)
	}
	return w, nil
}

// String is the canonical Windows spelling.
func (w winPath) String() string {
	return string(w.drive) + `:\` + strings.Join(w.parts, `\`)
}

// isWinPath tells a Windows path (one Run translates) from a Linux command.
func isWinPath(p string) bool {
	s := strings.ReplaceAll(p, "/", `\`)
	s = strings.TrimPrefix(s, `\\?\`)
	if len(s) >= 3 && s[0] == '\\' && isLetter(s[1]) && s[2] == ':' {
		return true
	}
	return len(s) >= 2 && isLetter(s[0]) && s[1] == ':'
}

// LocalPath translates a Windows path to the file that simulates it.
// Windows file names are case-insensitive, so each existing component is
// matched regardless of case; components that do not exist yet keep the
// case given.
func (h *Host) LocalPath(p string) (string, error) {
	w, err := parsePath(p)
	if err != nil {
		return "", err
	}
	return h.resolve(w), nil
}

func (h *Host) resolve(w winPath) string {
	cur := filepath.Join(h.fsRoot, string(w.drive))
	for i, c := range w.parts {
		next := filepath.Join(cur, c)
		if _, err := os.Lstat(next); err == nil {
			cur = next
			continue
		}
		m := foldMatch(cur, c)
		if m == "" {
			return filepath.Join(append([]string{cur}, w.parts[i:]...)...)
		}
		cur = filepath.Join(cur, m)
	}
	return cur
}

// foldMatch finds the entry of dir equal to name ignoring case; os.ReadDir
// sorts, so the choice is stable if Linux-side files differ only in case.
func foldMatch(dir, name string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	for _, e := range ents {
		if strings.EqualFold(e.Name(), name) {
			return e.Name()
		}
	}
	return ""
}
