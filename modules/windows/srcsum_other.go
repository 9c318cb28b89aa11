//go:build !linux

package windows

import "os"

// statKey: size and mtime only; the racy window covers the rest.
func statKey(os.FileInfo, *srcKey) {}
