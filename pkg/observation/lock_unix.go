// SPDX-License-Identifier: Apache-2.0

//go:build unix

package observation

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock, waiting for other holders; it is released
// by unlockFile or when the file is closed.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

func unlockFile(f *os.File) { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// openAppend opens path for appending without following a symlink and without
// blocking on a FIFO (the Epilog runs as root in a folder others may reach).
func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
}

// ownerUID returns the owner of a file.
func ownerUID(fi os.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
