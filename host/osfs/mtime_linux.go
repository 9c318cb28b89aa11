package osfs

import (
	"time"

	"golang.org/x/sys/unix"
)

// Linux stamps file times from its coarse clock, which advances once a
// jiffy: at most 10 ms (HZ=100).
const jiffy = 10 * time.Millisecond

// ModTimeStep is how coarsely the file system holding path (or its nearest
// existing parent) stamps modification times (host.ModTimeStepper): a
// jiffy on the local file systems Linux nodes and test machines use, two
// seconds on FAT, 0 (not known) on anything else, network file systems
// included, whose times come from the server's clock.
func ModTimeStep(path string) time.Duration {
	p, err := NearestExisting(path)
	if err != nil {
		return 0
	}
	var st unix.Statfs_t
	if unix.Statfs(p, &st) != nil {
		return 0
	}
	return stepOf(int64(st.Type)) //nolint:unconvert // Type's width differs by architecture
}

// zfsMagic: ZFS on Linux is out of tree; x/sys/unix has no constant.
const zfsMagic = 0x2fc12fc1

func stepOf(fsType int64) time.Duration {
	switch fsType {
	case unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.TMPFS_MAGIC,
		unix.OVERLAYFS_SUPER_MAGIC, unix.F2FS_SUPER_MAGIC, zfsMagic,
		unix.EXFAT_SUPER_MAGIC: // exFAT's stamps are 10 ms
		return jiffy
	case unix.MSDOS_SUPER_MAGIC: // vfat too: 2 s stamps
		return 2 * time.Second
	}
	return 0
}
