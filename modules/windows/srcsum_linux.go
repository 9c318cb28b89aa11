package windows

import (
	"os"
	"syscall"
)

// statKey adds what Linux knows besides size and mtime: the inode, and the
// change time, which no program can set back.
func statKey(fi os.FileInfo, k *srcKey) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		k.dev, k.ino = uint64(st.Dev), st.Ino
		k.ctime = st.Ctim.Nano()
	}
}
