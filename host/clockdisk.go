package host

import (
	"context"
	"time"
)

// System is what a host says about itself that changes while it runs, so
// it is asked each time rather than cached with Facts: its clock and the
// free space of a disk. The preflight checks read both before a join
// changes anything (a clock far off the API server's makes certificates
// fail later with an obscure error; a full disk fails a copy halfway).
type System interface {
	// SystemTime reads the host's clock.
	SystemTime(ctx context.Context) (time.Time, error)
	// DiskFree describes the volume holding path. A path that does not
	// exist yet (C:\k before a join) is answered for its nearest existing
	// parent: the volume it will be created on.
	DiskFree(ctx context.Context, path string) (DiskSpace, error)
}

// DiskSpace is a volume's size and the bytes the caller may still write.
type DiskSpace struct {
	// Free is what the caller may write (quotas applied).
	Free uint64 `json:"free"`
	// Total is the volume's size.
	Total uint64 `json:"total"`
}
