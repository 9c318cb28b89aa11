package modutil

import (
	"bytes"
	"errors"
	"strings"
)

// ErrUTF16 refuses a text file in UTF-16 (what PowerShell 5's `>` writes):
// editing it line by line as UTF-8 would corrupt it, and the tools that
// read such files on Windows (sshd's authorized keys, containerd's TOML)
// cannot read it anyway.
var ErrUTF16 = errors.New("the file is UTF-16 (it starts with a UTF-16 byte order mark, as PowerShell 5's > writes); rewrite it as UTF-8 or ASCII")

// utf8BOM is the byte order mark some Windows editors put before UTF-8.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Lines is a text file split for editing line by line, as the modules that
// edit a file someone else also writes (win_authorized_key) need: written
// back, it keeps the file's line endings (CRLF when it has any) and its
// UTF-8 byte order mark, and ends its last line with a newline whether the
// original did or not.
type Lines struct {
	Lines []string
	// NL is the line ending written: "\r\n" or "\n".
	NL string
	// BOM: the file started with a UTF-8 byte order mark.
	BOM bool
}

// ParseLines splits content; ErrUTF16 for a UTF-16 file. An empty file has
// no lines.
func ParseLines(content []byte) (Lines, error) {
	if bytes.HasPrefix(content, []byte{0xFF, 0xFE}) || bytes.HasPrefix(content, []byte{0xFE, 0xFF}) {
		return Lines{}, ErrUTF16
	}
	l := Lines{NL: "\n"}
	if rest, ok := bytes.CutPrefix(content, utf8BOM); ok {
		l.BOM, content = true, rest
	}
	if bytes.Contains(content, []byte("\r\n")) {
		l.NL = "\r\n"
	}
	text := strings.ReplaceAll(string(content), "\r\n", "\n")
	if text != "" {
		l.Lines = strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	}
	return l, nil
}

// Bytes is the file's content with l.Lines.
func (l Lines) Bytes() []byte {
	var b bytes.Buffer
	if l.BOM {
		b.Write(utf8BOM)
	}
	for _, line := range l.Lines {
		b.WriteString(line)
		b.WriteString(l.NL)
	}
	return b.Bytes()
}
