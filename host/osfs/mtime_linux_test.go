package osfs

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/sys/unix"
)

func TestModTimeStep(t *testing.T) {
	assert.Equal(t, jiffy, stepOf(unix.EXT4_SUPER_MAGIC))
	assert.Equal(t, jiffy, stepOf(unix.TMPFS_MAGIC))
	assert.Equal(t, 2*time.Second, stepOf(unix.MSDOS_SUPER_MAGIC))
	assert.Zero(t, stepOf(unix.NFS_SUPER_MAGIC), "a network file system's times are its server's")
	assert.Zero(t, ModTimeStep("\x00"), "a path that cannot be asked about is not known")
}
