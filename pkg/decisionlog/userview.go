// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// The per-user views let a user read their own decisions, and the runtime
// guard's events about their own jobs, without reading the logs (mode 0640:
// they list every user's jobs). A root process (the controller's `coscheml
// redecide --loop`) copies each uid's newest records into
// <log folder>/by-user/<uid>.log: a file owned by root, mode 0640, that its
// user reads through a POSIX ACL entry (user:<uid>:r--) and nobody else may
// read or write, in a folder owned by root with mode 0711: a user opens the
// one file named by their uid and can neither list the folder, place a file or
// link in it, nor change their view (they do not own it, so they cannot chmod
// it). A record is copied as its owner may see it (ForOwner): other jobs are
// not named.

// UserViewMode and UserViewDirMode are the modes of the views and their folder.
const (
	UserViewMode    = 0o640
	UserViewDirMode = 0o711
	// MaxUserView bounds the records kept per user (the newest).
	MaxUserView = 1000
)

// NoUser is the uid of a guard record whose job's user did not resolve to a
// uid: such a record is in no view.
const NoUser = ^uint32(0)

// UserViewDir is the folder of the per-user views of the log at logPath.
func UserViewDir(logPath string) string { return filepath.Join(filepath.Dir(logPath), "by-user") }

// UserViewPath is uid's view of the log at logPath.
func UserViewPath(logPath string, uid uint32) string {
	return filepath.Join(UserViewDir(logPath), strconv.FormatUint(uint64(uid), 10)+".log")
}

// ViewPublisher writes the per-user views. It remembers what it wrote, so a
// publish rewrites only the views whose records changed. Use one per process.
type ViewPublisher struct {
	LogPath string
	// GuardDir is guard.event_dir: the guard's records of each user's jobs
	// (every <node>.log in it) go into their views too; "" for none.
	GuardDir   string
	MaxPerUser int // the newest records kept per user (0: all)
	written    map[uint32][sha256.Size]byte
}

// Publish writes every uid's view that changed since the last publish (root's
// records excepted: root reads the logs) and returns how many it wrote. It must
// run as root: the views are root's, readable by their user through an ACL.
func (p *ViewPublisher) Publish() (int, error) {
	if os.Geteuid() != 0 {
		return 0, errors.New("per-user decision views: must run as root (each view is root's, readable by its user alone)")
	}
	d, err := userViewDir(UserViewDir(p.LogPath))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	ours := func(r *Record) bool { return r.UserID != 0 && r.UserID != NoUser }
	recs, err := readRotated(p.LogPath, func(r *Record) bool { return ours(r) && r.Op != OpGuard })
	if err != nil {
		return 0, err
	}
	if p.GuardDir != "" {
		logs, _ := filepath.Glob(filepath.Join(p.GuardDir, "*.log"))
		for _, l := range logs {
			g, err := readRotated(l, func(r *Record) bool { return ours(r) && r.Op == OpGuard })
			if err != nil {
				return 0, fmt.Errorf("per-user decision views: guard events: %w", err)
			}
			recs = append(recs, g...)
		}
	}
	byUser := map[uint32][]Record{}
	for _, r := range recs {
		byUser[r.UserID] = append(byUser[r.UserID], r)
	}
	uids := make([]uint32, 0, len(byUser))
	for uid := range byUser {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	if p.written == nil {
		p.written = map[uint32][sha256.Size]byte{}
	}
	n := 0
	for _, uid := range uids {
		rs := byUser[uid]
		slices.SortStableFunc(rs, func(a, b Record) int { return a.Time.Compare(b.Time) })
		if p.MaxPerUser > 0 && len(rs) > p.MaxPerUser {
			rs = rs[len(rs)-p.MaxPerUser:]
		}
		b, err := encodeView(uid, rs)
		if err != nil {
			return n, err
		}
		sum := sha256.Sum256(b)
		if old, ok := p.written[uid]; ok && old == sum {
			continue
		}
		if err := writeUserView(d, uid, b); err != nil {
			return n, err
		}
		p.written[uid] = sum
		n++
	}
	return n, nil
}

// encodeView is the view of uid's records: JSON lines, each as its owner may
// see it.
func encodeView(uid uint32, recs []Record) ([]byte, error) {
	var b []byte
	for i := range recs {
		r := ForOwner(recs[i])
		line, err := json.Marshal(&r)
		if err != nil {
			return nil, fmt.Errorf("per-user decision view of uid %d: %w", uid, err)
		}
		b = append(append(b, line...), '\n')
	}
	return b, nil
}

// otherJobRE finds a job (a Slurm job id) or a queued decision (a decision
// id) named in a reason, with the (tag, class) or (class, placed ...) that may
// follow it.
var otherJobRE = regexp.MustCompile(`\b(job|decision) ([0-9]+(?:[_+][0-9]+)*|[a-z0-9]+-[a-z0-9]+(?:-[0-9a-f]+)?)\b( \([^()]*\))?`)

// ForOwner is r as the owner of its job may see it: the decision's co-runners
// and every other job named in its reason (job ids, queued decisions, their
// tags and classes) become "another job", as `coscheml explain` and `status`
// show other users' jobs to an ordinary user. The record's own job and
// decision stay named.
func ForOwner(r Record) Record {
	if len(r.CoRunners) > 0 {
		co := make([]string, len(r.CoRunners))
		for i := range co {
			co[i] = "another job"
		}
		r.CoRunners = co
	}
	r.Reason = redactOtherJobs(r.Reason, r.JobID, r.ID)
	return r
}

// redactOtherJobs rewrites every job or queued decision s names that is not
// one of own. A number with a fraction is a speed ("new job 0.95"), not a job.
// A rewrite can make a new mention ("job 7 8" -> "another job 8"), so it runs
// until nothing changes; each pass that changes something uses up an id, so
// it ends.
func redactOtherJobs(s string, own ...string) string {
	for {
		next := redactOnce(s, own)
		if next == s {
			return s
		}
		s = next
	}
}

func redactOnce(s string, own []string) string {
	ms := otherJobRE.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range ms {
		word, id := s[m[2]:m[3]], s[m[4]:m[5]]
		if slices.Contains(own, id) || (m[5] < len(s)-1 && s[m[5]] == '.' && s[m[5]+1] >= '0' && s[m[5]+1] <= '9') {
			continue
		}
		b.WriteString(s[last:m[0]])
		if word == "decision" {
			b.WriteString("decision of another job")
		} else {
			b.WriteString("another job")
		}
		last = m[1]
	}
	b.WriteString(s[last:])
	return b.String()
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
// followed) owned by root, readable by uid alone through an ACL, renamed over
// the old one, both relative to the checked folder d.
func writeUserView(d *os.File, uid uint32, b []byte) (err error) {
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
	if err = f.Chown(0, 0); err != nil {
		return fmt.Errorf("per-user decision view %s: %w", f.Name(), err)
	}
	if err = setReadACL(f, uid); err != nil {
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

// POSIX ACL tags and the xattr's layout (Linux, acl_ea.h): a version, then
// entries of tag, permission and id, little-endian.
const (
	aclVersion  = 2
	aclUserObj  = 0x01
	aclUser     = 0x02
	aclGroupObj = 0x04
	aclMask     = 0x10
	aclOther    = 0x20
	aclRead     = 4
	aclWrite    = 2
	aclUndefID  = ^uint32(0)
)

// setReadACL gives f the access ACL owner rw-, user uid r--, group ---, mask
// r--, other ---: mode 0640 where the group class is the mask, so the root
// group reads nothing and uid reads its view. A file system without POSIX ACLs
// gets no view (a clear error): the site mounts it with ACLs or keeps the
// decision log where they are (docs/install.md).
func setReadACL(f *os.File, uid uint32) error {
	entries := [][3]uint32{
		{aclUserObj, aclRead | aclWrite, aclUndefID},
		{aclUser, aclRead, uid},
		{aclGroupObj, 0, aclUndefID},
		{aclMask, aclRead, aclUndefID},
		{aclOther, 0, aclUndefID},
	}
	var buf bytes.Buffer
	binary.Write(&buf, binary.LittleEndian, uint32(aclVersion))
	for _, e := range entries {
		binary.Write(&buf, binary.LittleEndian, uint16(e[0]))
		binary.Write(&buf, binary.LittleEndian, uint16(e[1]))
		binary.Write(&buf, binary.LittleEndian, e[2])
	}
	// The descriptor's path: the xattr lands on the file opened, not on
	// whatever a name may point to by now.
	err := syscall.Setxattr("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), "system.posix_acl_access", buf.Bytes(), 0)
	if errors.Is(err, syscall.ENOTSUP) {
		return fmt.Errorf("the file system has no POSIX ACLs, so no view can be readable by its user alone: mount it with ACLs (ext4, xfs and tmpfs have them): %w", err)
	}
	if err != nil {
		return fmt.Errorf("read access for uid %d (POSIX ACL): %w", uid, err)
	}
	return nil
}

// OpenableUserView returns uid's view of the log at logPath when it can be
// trusted: a regular file owned by root that no one else may write, in a
// folder owned by root that no one else may write (so no other user placed or
// changed it). "" otherwise.
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
	if !fst.Mode().IsRegular() || !ok || fsys.Uid != 0 || fst.Mode().Perm()&0o022 != 0 {
		return ""
	}
	return p
}
