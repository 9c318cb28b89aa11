package host

import "context"

// NativePather is implemented by backends whose paths are not the names the
// host's own OS uses for them: the simulation keeps C:\k under a directory
// of the Linux machine. A transport that reaches the same file system by
// another way (SFTP) asks for the native path first; a backend without it
// uses the path unchanged.
type NativePather interface {
	NativePath(ctx context.Context, path string) (string, error)
}
