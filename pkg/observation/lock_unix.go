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
