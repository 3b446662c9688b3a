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

// viewEnv is a log folder the test users can reach, with a decision log and a
// guard event folder; it returns the log's path and the guard folder.
func viewEnv(t *testing.T) (string, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the views are root's, read by their users: needs root")
	}
	base := t.TempDir()
	os.Chmod(base, 0o755) // let the test users reach the folder
	os.Chmod(filepath.Dir(base), 0o755)
	return filepath.Join(base, "decisions.log"), filepath.Join(base, "guard")
}

func logRecords(t *testing.T, path string, recs ...Record) {
	t.Helper()
	w := NewWriter(path, 0, 0)
	for _, r := range recs {
		w.Log(r)
	}
	w.Close()
	if err := w.Err(); err != nil {
		t.Fatal(err)
	}
}

// TestPublishUserViews: each user's view holds only their records and the
// guard's events about their jobs, is theirs alone to read and nobody's but
// root's to change (checked as those users: they can neither write, append
// to nor chmod their view), and the folder cannot be listed or written by
// them; a link or another user's folder in its place is refused; root's
// records are left out.
func TestPublishUserViews(t *testing.T) {
	logPath, guardDir := viewEnv(t)
	now := time.Now()
	logRecords(t, logPath,
		Record{ID: "a-1", Time: now, Op: "submit", JobID: "11", UserID: 61001, Tag: "alpha", Reason: "alpha's reason"},
		Record{ID: "b-1", Time: now, Op: "submit", JobID: "12", UserID: 61002, Tag: "beta", Reason: "beta's reason"},
		Record{ID: "a-2", Time: now.Add(time.Second), Op: "modify", JobID: "11", UserID: 61001, Tag: "alpha", Reason: "alpha again"},
		Record{ID: "r-1", Time: now, Op: "submit", JobID: "13", UserID: 0, Tag: "root-job"})
	os.MkdirAll(guardDir, 0o755)
	logRecords(t, filepath.Join(guardDir, "n1.log"),
		Record{ID: "g-1", Time: now.Add(2 * time.Second), Op: OpGuard, JobID: "11", UserID: 61001, Action: "requeue", Reason: "guard event of job 11"},
		Record{ID: "g-2", Time: now, Op: OpGuard, JobID: "14", UserID: NoUser, Action: "requeue", Reason: "a job of an unknown user"})
	pub := &ViewPublisher{LogPath: logPath, GuardDir: guardDir, MaxPerUser: 10}
	n, err := pub.Publish()
	if err != nil || n != 2 {
		t.Fatalf("published %d, %v; want 2 views", n, err)
	}
	dir := UserViewDir(logPath)
	st, _ := os.Lstat(dir)
	if st.Mode().Perm() != UserViewDirMode || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("folder %v uid %d, want %o root", st.Mode(), st.Sys().(*syscall.Stat_t).Uid, UserViewDirMode)
	}
	for _, uid := range []uint32{0, NoUser} {
		if _, err := os.Stat(UserViewPath(logPath, uid)); !os.IsNotExist(err) {
			t.Errorf("uid %d got a view: %v", uid, err)
		}
	}
	a := UserViewPath(logPath, 61001)
	fst, _ := os.Lstat(a)
	if fst.Mode().Perm()&0o022 != 0 || fst.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("view %v uid %d, want root's, writable by root alone", fst.Mode(), fst.Sys().(*syscall.Stat_t).Uid)
	}
	if got := OpenableUserView(logPath, 61001); got != a {
		t.Errorf("OpenableUserView = %q, want %q", got, a)
	}
	if got := OpenableUserView(logPath, 61003); got != "" {
		t.Errorf("a user without records has a view: %q", got)
	}

	out, err := asUser(61001, "cat", a)
	if err != nil || !strings.Contains(out, "alpha's reason") || !strings.Contains(out, "alpha again") || strings.Contains(out, "beta") ||
		!strings.Contains(out, "guard event of job 11") || strings.Contains(out, "unknown user") {
		t.Errorf("61001 reading its view: %v\n%s", err, out)
	}
	// Its own view, yet not its own to change: no write, no append, no chmod.
	for _, argv := range [][]string{
		{"sh", "-c", "echo forged >> " + a},
		{"sh", "-c", "echo forged > " + a},
		{"chmod", "u+w", a},
		{"truncate", "-s", "0", a},
	} {
		if out, err := asUser(61001, argv...); err == nil {
			t.Errorf("61001 ran %q on its view: %s", argv, out)
		}
	}
	if b, _ := os.ReadFile(a); strings.Contains(string(b), "forged") || !strings.Contains(string(b), "alpha again") {
		t.Errorf("the view was changed by its reader:\n%s", b)
	}
	if out, err := asUser(61001, "cat", UserViewPath(logPath, 61002)); err == nil || strings.Contains(out, "beta") {
		t.Errorf("61001 read 61002's view: %s", out)
	}
	if out, err := asUser(61003, "cat", a); err == nil {
		t.Errorf("61003 read 61001's view: %s", out)
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
	pub1 := &ViewPublisher{LogPath: logPath, MaxPerUser: 1}
	if _, err := pub1.Publish(); err != nil {
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
			logRecords(t, l2, Record{ID: "a-1", Time: now, Op: "submit", UserID: 61001})
			d := UserViewDir(l2)
			if err := plant(d); err != nil {
				t.Fatal(err)
			}
			if name == "folder" {
				os.Chown(d, 61001, 65534)
			}
			if _, err := (&ViewPublisher{LogPath: l2}).Publish(); err == nil || !strings.Contains(err.Error(), "not a folder owned by root") {
				t.Errorf("published into a planted %s: %v", name, err)
			}
			if got := OpenableUserView(l2, 61001); got != "" {
				t.Errorf("a view in a planted %s is trusted: %q", name, got)
			}
		})
	}
	// A view its user could change (owned by them, as views once were) is
	// not trusted.
	os.Chown(a, 61001, 0)
	if got := OpenableUserView(logPath, 61001); got != "" {
		t.Errorf("a view owned by its reader is trusted: %q", got)
	}
}

// A record is copied into its owner's view without naming other jobs: a
// sharing decision's co-runners, the jobs and queued decisions its reason
// names, their tags and classes; the guard's reasons likewise. The record's
// own job stays named.
func TestViewNamesNoOtherJob(t *testing.T) {
	logPath, guardDir := viewEnv(t)
	now := time.Now()
	logRecords(t, logPath,
		Record{ID: "mx-6-aaaaaaaaaaaa", Time: now, Op: "modify", JobID: "6078", UserID: 61001, Tag: "app24", Class: "hpc", Action: "share",
			CoRunners: []string{"secret-app", "other-tag"},
			Reason: "coscheml: share: job 6078 (app24, hpc); n811/gpu0 with job 3854 (secret-app, infer), queued decision mx-5-bbbbbbbbbbbb (other-tag, train): " +
				"predicted speed new job 0.95 (floor 0.75), job 3854 0.95 (floor 0.9), decision mx-5-bbbbbbbbbbbb 0.97 (floor 0.75); interference cost 0.09"})
	os.MkdirAll(guardDir, 0o755)
	logRecords(t, filepath.Join(guardDir, "n1.log"),
		Record{ID: "g-1", Time: now, Op: OpGuard, JobID: "6078", UserID: 61001, Action: "suspend",
			Reason: "coscheml guard: job 3854 on gpu 0: speed 0.50 below floor 0.90 for 60s; job 6078 (hpc, placed 2026-12-01T10:00:00Z) shares the GPU with it: suspend it until job 3854 ends."})
	if _, err := (&ViewPublisher{LogPath: logPath, GuardDir: guardDir}).Publish(); err != nil {
		t.Fatal(err)
	}
	out, err := asUser(61001, "cat", UserViewPath(logPath, 61001))
	if err != nil {
		t.Fatalf("reading the view: %v %s", err, out)
	}
	for _, leak := range []string{"3854", "secret-app", "other-tag", "mx-5-bbbbbbbbbbbb", "infer", "train"} {
		if strings.Contains(out, leak) {
			t.Errorf("the view names another job's %q:\n%s", leak, out)
		}
	}
	for _, keep := range []string{"job 6078 (app24, hpc)", "with another job, queued decision of another job", "new job 0.95 (floor 0.75)",
		"another job 0.95 (floor 0.9)", "until another job ends.", "job 6078 (hpc, placed"} {
		if !strings.Contains(out, keep) {
			t.Errorf("the view lacks %q:\n%s", keep, out)
		}
	}
}

// A publish rewrites only the views whose records changed: one user's new
// decision rewrites that user's view, not the others'.
func TestPublishWritesOnlyChangedViews(t *testing.T) {
	logPath, _ := viewEnv(t)
	now := time.Now()
	var recs []Record
	for u := uint32(0); u < 100; u++ {
		recs = append(recs, Record{ID: "x-" + string(rune('a'+u%26)), Time: now, Op: "submit", UserID: 62000 + u, Reason: strings.Repeat("r", 300)})
	}
	logRecords(t, logPath, recs...)
	pub := &ViewPublisher{LogPath: logPath, MaxPerUser: MaxUserView}
	if n, err := pub.Publish(); err != nil || n != 100 {
		t.Fatalf("first publish: %d views, %v", n, err)
	}
	inode := func(uid uint32) uint64 {
		st, err := os.Stat(UserViewPath(logPath, uid))
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	before := map[uint32]uint64{62000: inode(62000), 62007: inode(62007)}
	if n, err := pub.Publish(); err != nil || n != 0 {
		t.Errorf("publish of an unchanged log wrote %d views (%v)", n, err)
	}
	logRecords(t, logPath, Record{ID: "y-1", Time: now, Op: "submit", UserID: 62007, Reason: "new"})
	if n, err := pub.Publish(); err != nil || n != 1 {
		t.Errorf("one user's new record rewrote %d views (%v), want 1", n, err)
	}
	if inode(62000) != before[62000] || inode(62007) == before[62007] {
		t.Errorf("rewritten: 62000 %v, 62007 %v; want only 62007's", inode(62000) != before[62000], inode(62007) != before[62007])
	}
}

// FuzzRedactOtherJobs: whatever a reason says, no job id but the record's own
// survives the redaction.
func FuzzRedactOtherJobs(f *testing.F) {
	for _, s := range []string{"with job 3854 (app21, hpc): job 3854 0.95 (floor 0.75)", "job 12.", "decision mx-1-abc (t, c)", "new job 0.95", "job job 7", "job 42 and job 4_2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := redactOtherJobs(s, "42")
		for _, m := range otherJobRE.FindAllStringSubmatchIndex(out, -1) {
			id := out[m[4]:m[5]]
			if id == "42" || (m[5] < len(out)-1 && out[m[5]] == '.' && out[m[5]+1] >= '0' && out[m[5]+1] <= '9') {
				continue
			}
			t.Fatalf("%q -> %q still names %q", s, out, out[m[0]:m[1]])
		}
	})
}
