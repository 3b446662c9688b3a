// SPDX-License-Identifier: Apache-2.0

// Package safeopen opens files that slurmctld's library and the CLI read from
// shared or user-writable folders: regular files only, without ever blocking.
//
// A FIFO (or a device) where a configuration, model, profile or residency entry
// should be would block a plain open(2) or read(2) forever and stall slurmctld;
// a symlink in a folder other users can write would let them point the reader
// at any file. Opening with O_NONBLOCK never waits for a FIFO's writer, and the
// fstat that follows refuses anything but a regular file, naming the path.
package safeopen

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is returned (wrapped) for a path that is not a regular file: a
// FIFO, socket, device, folder, or (with NoFollow) a symlink.
var ErrNotRegular = errors.New("not a regular file")

// Follow says whether the last component of the path may be a symlink.
type Follow bool

const (
	// FollowLinks allows a symlink as the last component (admin-named files
	// such as the configuration, which config management often links).
	FollowLinks Follow = true
	// NoFollow refuses a symlink as the last component (files inside data
	// folders that non-root users can write).
	NoFollow Follow = false
)

// Regular opens path read-only if it is a regular file. Errors name the path;
// a missing file is still os.ErrNotExist (wrapped) so callers can tell it apart.
func Regular(path string, follow Follow) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if !follow {
		flags |= syscall.O_NOFOLLOW
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s: %w (a symlink, refused)", path, ErrNotRegular)
		}
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, kind(st.Mode()))
	}
	return f, nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a folder"
	case m&os.ModeSymlink != 0:
		return "a symlink"
	}
	return "mode " + m.String()
}

// ErrNotDir is returned (wrapped) for a path that is not a folder.
var ErrNotDir = errors.New("not a folder")

// Dir opens a folder for listing. O_DIRECTORY makes the kernel refuse anything
// else before opening it, so a FIFO there is ENOTDIR, never a wait for a writer.
// Symlinks to folders are followed (admins link data folders to shared storage).
func Dir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("%s: %w", path, ErrNotDir)
		}
		return nil, err
	}
	return f, nil
}

// ErrTooLarge is returned (wrapped) by ReadLimited for a file over its limit.
var ErrTooLarge = errors.New("file too large")

// ReadLimited reads a whole regular file (Regular's rules) of at most limit
// bytes. A larger file is an error rather than a silent cut: its tail would be
// read as if it were all there is.
func ReadLimited(path string, follow Follow, limit int64) ([]byte, error) {
	f, err := Regular(path, follow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: larger than %d bytes", path, ErrTooLarge, limit)
	}
	return b, nil
}
