package host

import (
	"context"
	"time"
)

// ModTimeStepper is a backend that knows how its file systems stamp a
// file's modification time. The node agent's hash cache asks it: a sum may
// be trusted while size and mtime are unchanged only once a write after
// the hash could no longer get the same mtime (git's "racily clean"
// problem), and how long that takes is the file system's business — two
// seconds on FAT, a clock tick on NTFS or ext4. It is not a wire op: the
// cache runs in the agent, beside the file system it asks about.
type ModTimeStepper interface {
	// ModTimeStep is the coarsest step by which the file system holding
	// path (or its nearest existing parent) advances a modification time:
	// its own resolution or the clock tick it stamps with, whichever is
	// coarser. 0 when it is not known (a network file system stamps with
	// another machine's clock).
	ModTimeStep(ctx context.Context, path string) time.Duration
}
