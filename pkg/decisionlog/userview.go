// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// The per-user views let a user read their own decisions without reading the
// log (Mode 0640: it lists every user's jobs). A root process (the controller's
// `coscheml redecide --loop`) copies each uid's newest records into
// <log folder>/by-user/<uid>.log, owned by that uid with mode 0400, in a folder
// owned by root with mode 0711: a user opens the one file named by their uid and
// can neither list the folder nor place a file or link in it.

// UserViewMode and UserViewDirMode are the modes of the views and their folder.
const (
	UserViewMode    = 0o400
	UserViewDirMode = 0o711
	// MaxUserView bounds the records kept per user (the newest).
	MaxUserView = 1000
)

// UserViewDir is the folder of the per-user views of the log at logPath.
func UserViewDir(logPath string) string { return filepath.Join(filepath.Dir(logPath), "by-user") }

// UserViewPath is uid's view of the log at logPath.
func UserViewPath(logPath string, uid uint32) string {
	return filepath.Join(UserViewDir(logPath), strconv.FormatUint(uint64(uid), 10)+".log")
}

// PublishUserViews writes every uid's view (root's records excepted: root reads
// the log) from the log and its rotated file, and returns how many it wrote. It
// must run as root: it creates the folder root-owned and chowns each view.
func PublishUserViews(logPath string, maxPerUser int) (int, error) {
	if os.Geteuid() != 0 {
		return 0, errors.New("per-user decision views: must run as root (each view is owned by its user)")
	}
	d, err := userViewDir(UserViewDir(logPath))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	recs, err := readRotated(logPath, func(r *Record) bool { return r.UserID != 0 && r.Op != OpGuard })
	if err != nil {
		return 0, err
	}
	byUser := map[uint32][]Record{}
	for _, r := range recs {
		byUser[r.UserID] = append(byUser[r.UserID], r)
	}
	n := 0
	for uid, rs := range byUser {
		if maxPerUser > 0 && len(rs) > maxPerUser {
			rs = rs[len(rs)-maxPerUser:]
		}
		if err := writeUserView(d, uid, rs); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// userViewDir makes dir root-owned with UserViewDirMode, refusing anything that
// is not a plain folder of root's (a link, another user's folder), and returns
// it open: the views are written through this descriptor, so a folder swapped
// after the check (its parent may be SlurmUser's) is never written into.
func userViewDir(dir string) (*os.File, error) {
	if err := os.Mkdir(dir, UserViewDirMode); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("per-user decision views: %w", err)
	}
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("per-user decision views: %s is not a folder owned by root (%v): refused", dir, err)
	}
	d := os.NewFile(uintptr(fd), dir)
	st, err := d.Stat()
	if err != nil {
		d.Close()
		return nil, fmt.Errorf("per-user decision views: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != 0 {
		d.Close()
		return nil, fmt.Errorf("per-user decision views: %s is not a folder owned by root (%v): refused", dir, st.Mode())
	}
	if st.Mode().Perm() != UserViewDirMode {
		if err := d.Chmod(UserViewDirMode); err != nil {
			d.Close()
			return nil, fmt.Errorf("per-user decision views: %w", err)
		}
	}
	return d, nil
}

// writeUserView replaces uid's view atomically: a new file (O_EXCL, no link
// followed) owned by uid and readable by it alone, renamed over the old one,
// both relative to the checked folder d.
func writeUserView(d *os.File, uid uint32, recs []Record) (err error) {
	var b []byte
	for i := range recs {
		line, err := json.Marshal(&recs[i])
		if err != nil {
			return fmt.Errorf("per-user decision view of uid %d: %w", uid, err)
		}
		b = append(append(b, line...), '\n')
	}
	dfd := int(d.Fd())
	name := strconv.FormatUint(uint64(uid), 10) + ".log"
	tmp := name + ".tmp"
	syscall.Unlinkat(dfd, tmp) // a temp file left by a crash (the folder is root's alone)
	fd, err := syscall.Openat(dfd, tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("per-user decision view %s/%s: %w", d.Name(), tmp, err)
	}
	f := os.NewFile(uintptr(fd), filepath.Join(d.Name(), tmp))
	defer func() {
		if err != nil {
			f.Close()
			syscall.Unlinkat(dfd, tmp)
		}
	}()
	if _, err = f.Write(b); err != nil {
		return fmt.Errorf("per-user decision view %s: %w", f.Name(), err)
	}
	if err = f.Chown(int(uid), 0); err != nil {
		return fmt.Errorf("per-user decision view %s: %w", f.Name(), err)
	}
	if err = f.Chmod(UserViewMode); err != nil {
		return fmt.Errorf("per-user decision view %s: %w", f.Name(), err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("per-user decision view %s: %w", f.Name(), err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("per-user decision view %s: %w", f.Name(), err)
	}
	if err = syscall.Renameat(dfd, tmp, dfd, name); err != nil {
		return fmt.Errorf("per-user decision view %s/%s: %w", d.Name(), name, err)
	}
	return nil
}

// OpenableUserView returns uid's view of the log at logPath when it can be
// trusted: a regular file owned by uid in a folder owned by root that no one
// else may write (so no other user placed it). "" otherwise.
func OpenableUserView(logPath string, uid uint32) string {
	dir := UserViewDir(logPath)
	st, err := os.Lstat(dir)
	if err != nil {
		return ""
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !st.IsDir() || !ok || sys.Uid != 0 || st.Mode().Perm()&0o022 != 0 {
		return ""
	}
	p := UserViewPath(logPath, uid)
	fst, err := os.Lstat(p)
	if err != nil {
		return ""
	}
	fsys, ok := fst.Sys().(*syscall.Stat_t)
	if !fst.Mode().IsRegular() || !ok || fsys.Uid != uid {
		return ""
	}
	return p
}
