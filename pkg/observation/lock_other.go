//go:build !unix

package observation

import (
	"errors"
	"os"
)

// Appending needs flock; coscheml's node side runs on Linux only.
func lockFile(f *os.File) error {
	return errors.New("file locking is not supported on this system")
}

func unlockFile(f *os.File) {}
