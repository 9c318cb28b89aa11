package host

import (
	"context"
	"io"
	"io/fs"
)

// Uploader is implemented by hosts with another way to write a file than
// the agent's stream, faster for large content (the SSH transport's SFTP).
// Upload has exactly WriteFile's semantics: path is replaced whole and
// atomically (a failure, including an error reading content, leaves the
// old file), the parent directory must exist, and mode is applied as
// WriteFile applies it. Wrappers of a Host (the hash cache) pass it
// through and treat it as a WriteFile.
type Uploader interface {
	Upload(ctx context.Context, path string, content io.Reader, mode fs.FileMode) error
}

// Upload writes content to path on h with its Uploader when it has one,
// else with WriteFile: what modules streaming large files call.
func Upload(ctx context.Context, h Host, path string, content io.Reader, mode fs.FileMode) error {
	if u, ok := h.(Uploader); ok {
		return u.Upload(ctx, path, content, mode)
	}
	return h.WriteFile(ctx, path, content, mode)
}
