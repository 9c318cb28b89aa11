package local

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"unicode/utf8"

	"github.com/wsu-project/wsu/host"
)

// chunkSize is how much is copied between two cancellation checks.
const chunkSize = 1 << 20

// maxTempBase keeps the temp file name within NAME_MAX even for long targets.
const maxTempBase = 64

// copyChunks copies src to dst, checking ctx between chunks so a cancelled
// play stops a large transfer promptly.
func copyChunks(ctx context.Context, dst io.Writer, src io.Reader) (int64, error) {
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n, err := io.CopyN(dst, src, chunkSize)
		total += n
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

func (h *localHost) Stat(ctx context.Context, path string) (host.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return host.FileInfo{}, err
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return host.FileInfo{Path: path}, nil
	}
	if err != nil {
		return host.FileInfo{}, err
	}
	return host.FileInfo{
		Path:    path,
		Exists:  true,
		IsDir:   fi.IsDir(),
		Size:    fi.Size(),
		Mode:    fi.Mode(),
		ModTime: fi.ModTime(),
	}, nil
}

func (h *localHost) SHA256(ctx context.Context, path string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	f, err := openRegular(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sum := sha256.New()
	if _, err := copyChunks(ctx, sum, f); err != nil {
		return "", fmt.Errorf("sha256 %s: %w", path, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

func (h *localHost) ReadFile(ctx context.Context, path string, limit int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := openRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if limit > 0 {
		// One byte past the limit tells "exactly limit" from "too large".
		r = io.LimitReader(f, limit+1)
	}
	var buf bytes.Buffer
	if _, err := copyChunks(ctx, &buf, r); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if limit > 0 && int64(buf.Len()) > limit {
		return nil, fmt.Errorf("read %s: file is larger than the limit of %d bytes", path, limit)
	}
	return buf.Bytes(), nil
}

// openRegular opens path for reading and refuses directories, whose read
// errors would otherwise be cryptic.
func openRegular(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: errors.New("is a directory")}
	}
	return f, nil
}

func (h *localHost) WriteFile(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dir, base := filepath.Split(path)
	if base == "" {
		return fmt.Errorf("write %s: path names a directory", path)
	}
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, tempPattern(base))
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmpName, closed, renamed := tmp.Name(), false, false
	defer func() {
		// Whatever failed, the target is untouched and no temp file lingers.
		if !closed {
			tmp.Close()
		}
		if !renamed {
			os.Remove(tmpName)
		}
	}()

	if _, err := copyChunks(ctx, tmp, content); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	closed = true
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Last chance to honour a cancel before the change becomes visible.
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	renamed = true
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("write %s: sync directory: %w", path, err)
	}
	return nil
}

// tempPattern names the temp file after its target so a leftover is
// recognisable, truncating long names at a rune boundary.
func tempPattern(base string) string {
	if len(base) > maxTempBase {
		base = base[:maxTempBase]
		for len(base) > 0 && !utf8.ValidString(base) {
			base = base[:len(base)-1]
		}
	}
	return ".wsu-tmp-" + base + "-*"
}

// syncDir makes a rename durable. Windows cannot fsync a directory, and
// NTFS journals the rename anyway.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (h *localHost) MkdirAll(ctx context.Context, path string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.MkdirAll(path, mode)
}

func (h *localHost) Chmod(ctx context.Context, path string, mode fs.FileMode) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return os.Chmod(path, mode)
}

func (h *localHost) Remove(ctx context.Context, path string, recursive bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if recursive {
		return os.RemoveAll(path) // already quiet about a missing path
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
