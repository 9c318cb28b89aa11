package sim

import (
	"context"
	"time"

	"github.com/wsu-project/wsu/host"
	"github.com/wsu-project/wsu/host/osfs"
)

// sysTable is what tests set about the simulated machine itself: a clock
// off the real one, a fuller disk, an older Windows build. Zero values
// mean "as the Linux machine running the simulation".
type sysTable struct {
	ClockOffset time.Duration `json:"clock_offset,omitempty"`
	// DiskFree, when set, caps the free space every volume reports.
	DiskFree *uint64 `json:"disk_free,omitempty"`
	Build    string  `json:"build,omitempty"`
}

func (t *tx) system() (*sysTable, error) { return table[sysTable](t, tSystem) }

// SystemTime is the Linux machine's clock, moved by SetClockOffset.
func (h *Host) SystemTime(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	var off time.Duration
	err := h.view(func(t *tx) error {
		sys, err := t.system()
		if err == nil {
			off = sys.ClockOffset
		}
		return err
	})
	return time.Now().Add(off), err
}

// DiskFree is the free space of the file system holding the simulation's
// directory for path, capped by SetDiskFree.
func (h *Host) DiskFree(ctx context.Context, path string) (host.DiskSpace, error) {
	if err := ctx.Err(); err != nil {
		return host.DiskSpace{}, err
	}
	lp, err := h.LocalPath(path)
	if err != nil {
		return host.DiskSpace{}, err
	}
	ds, err := osfs.DiskFree(lp)
	if err != nil {
		return host.DiskSpace{}, localNamed{err: err, local: lp, win: path}
	}
	err = h.view(func(t *tx) error {
		sys, err := t.system()
		if err == nil && sys.DiskFree != nil {
			ds.Free = min(ds.Free, *sys.DiskFree)
		}
		return err
	})
	return ds, err
}

var _ host.ModTimeStepper = (*Host)(nil)

// ModTimeStep is how coarsely the file system holding the simulation's
// file for path stamps modification times: the simulated host's files are
// files of the machine it runs on, so their times are that file system's.
func (h *Host) ModTimeStep(_ context.Context, path string) time.Duration {
	lp, err := h.LocalPath(path)
	if err != nil {
		return 0
	}
	return osfs.ModTimeStep(lp)
}

// SetClockOffset moves the simulated host's clock by d from the real one
// (a test's clock skew). It persists, like every table of the simulation.
func (h *Host) SetClockOffset(d time.Duration) error {
	return h.setSystem(func(s *sysTable) { s.ClockOffset = d })
}

// SetDiskFree caps the free space every volume reports (a test's full
// disk).
func (h *Host) SetDiskFree(free uint64) error {
	return h.setSystem(func(s *sysTable) { s.DiskFree = &free })
}

// SetBuild makes Facts report another Windows build ("" restores the
// simulation's own).
func (h *Host) SetBuild(build string) error {
	return h.setSystem(func(s *sysTable) { s.Build = build })
}

func (h *Host) setSystem(fn func(*sysTable)) error {
	return h.update(func(t *tx) error {
		sys, err := t.system()
		if err != nil {
			return err
		}
		fn(sys)
		t.mark(tSystem)
		return nil
	})
}
