// SPDX-License-Identifier: Apache-2.0

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

func openAppend(path string) (*os.File, error) {
	return nil, errors.New("appending observations is not supported on this system")
}

// ownerUID cannot tell the owner here: the held-out check fails closed.
func ownerUID(fi os.FileInfo) (uint32, bool) { return 0, false }
