// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// asUser runs argv as uid (the test runs as root) and returns its output and error.
func asUser(uid uint32, argv ...string) (string, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestPublishUserViews: each user's view holds only their records, is theirs
// alone to read (checked by reading as those users), and the folder cannot be
// listed or written by them; a link or another user's folder in its place is
// refused; root's records and the guard's are left out.
func TestPublishUserViews(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chowns the views: needs root")
	}
	base := t.TempDir()
	os.Chmod(base, 0o755) // let the test users reach the folder
	os.Chmod(filepath.Dir(base), 0o755)
	logPath := filepath.Join(base, "decisions.log")
	w := NewWriter(logPath, 0, 0)
	now := time.Now()
	for _, r := range []Record{
		{ID: "a-1", Time: now, Op: "submit", JobID: "11", UserID: 61001, Tag: "alpha", Reason: "alpha's reason"},
		{ID: "b-1", Time: now, Op: "submit", JobID: "12", UserID: 61002, Tag: "beta", Reason: "beta's reason"},
		{ID: "a-2", Time: now, Op: "modify", JobID: "11", UserID: 61001, Tag: "alpha", Reason: "alpha again"},
		{ID: "r-1", Time: now, Op: "submit", JobID: "13", UserID: 0, Tag: "root-job"},
		{ID: "g-1", Time: now, Op: OpGuard, JobID: "11", UserID: 61001, Reason: "guard event"},
	} {
		w.Log(r)
	}
	w.Close()
	n, err := PublishUserViews(logPath, 10)
	if err != nil || n != 2 {
		t.Fatalf("published %d, %v; want 2 views", n, err)
	}
	dir := UserViewDir(logPath)
	st, _ := os.Lstat(dir)
	if st.Mode().Perm() != UserViewDirMode || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("folder %v uid %d, want %o root", st.Mode(), st.Sys().(*syscall.Stat_t).Uid, UserViewDirMode)
	}
	if _, err := os.Stat(UserViewPath(logPath, 0)); !os.IsNotExist(err) {
		t.Errorf("root got a view: %v", err)
	}
	a := UserViewPath(logPath, 61001)
	fst, _ := os.Lstat(a)
	if fst.Mode().Perm() != UserViewMode || fst.Sys().(*syscall.Stat_t).Uid != 61001 {
		t.Errorf("view %v uid %d, want %o owned by 61001", fst.Mode(), fst.Sys().(*syscall.Stat_t).Uid, UserViewMode)
	}
	if got := OpenableUserView(logPath, 61001); got != a {
		t.Errorf("OpenableUserView = %q, want %q", got, a)
	}
	if got := OpenableUserView(logPath, 61003); got != "" {
		t.Errorf("a user without records has a view: %q", got)
	}

	out, err := asUser(61001, "cat", a)
	if err != nil || !strings.Contains(out, "alpha's reason") || !strings.Contains(out, "alpha again") || strings.Contains(out, "beta") || strings.Contains(out, "guard event") {
		t.Errorf("61001 reading its view: %v\n%s", err, out)
	}
	if out, err := asUser(61001, "cat", UserViewPath(logPath, 61002)); err == nil || strings.Contains(out, "beta") {
		t.Errorf("61001 read 61002's view: %s", out)
	}
	if out, err := asUser(61001, "ls", dir); err == nil {
		t.Errorf("61001 listed the views: %s", out)
	}
	if out, err := asUser(61001, "ln", "-s", "/etc/shadow", filepath.Join(dir, "61002.log.tmp")); err == nil {
		t.Errorf("61001 placed a link among the views: %s", out)
	}
	if out, err := asUser(61001, "cat", logPath); err == nil {
		t.Errorf("61001 read the log itself: %s", out)
	}

	// Only the newest records are kept per user.
	if _, err := PublishUserViews(logPath, 1); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(a); strings.Contains(string(b), "alpha's reason") || !strings.Contains(string(b), "alpha again") {
		t.Errorf("view beyond its bound:\n%s", b)
	}

	// A link or a user's folder in the views' place is refused.
	for name, plant := range map[string]func(string) error{
		"link":   func(d string) error { return os.Symlink(t.TempDir(), d) },
		"folder": func(d string) error { return os.Mkdir(d, 0o777) },
	} {
		t.Run(name, func(t *testing.T) {
			b2 := t.TempDir()
			l2 := filepath.Join(b2, "decisions.log")
			w := NewWriter(l2, 0, 0)
			w.Log(Record{ID: "a-1", Time: now, Op: "submit", UserID: 61001})
			w.Close()
			d := UserViewDir(l2)
			if err := plant(d); err != nil {
				t.Fatal(err)
			}
			if name == "folder" {
				os.Chown(d, 61001, 65534)
			}
			if _, err := PublishUserViews(l2, 10); err == nil || !strings.Contains(err.Error(), "not a folder owned by root") {
				t.Errorf("published into a planted %s: %v", name, err)
			}
			if got := OpenableUserView(l2, 61001); got != "" {
				t.Errorf("a view in a planted %s is trusted: %q", name, got)
			}
		})
	}
}
