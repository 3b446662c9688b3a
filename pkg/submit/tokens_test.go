// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/residency"
)

// TestTokenBoundToJob: a token is honoured at job_modify only when it is the
// one the job's own stored comment carries. A user's update of job 2 carrying
// job 1's token (the same uid signed both) used to drop job 1's reservation
// while job 1 stayed pinned to its GPU, so the next job saw that GPU idle.
func TestTokenBoundToJob(t *testing.T) {
	const uid = 1000
	tests := []struct {
		name string
		// upd builds the update of job 2 from the stored comments of job 1
		// (c1, token t1) and job 2 (c2, token t2).
		upd func(c1, t1, c2, t2 string) JobFields
		// kept1/kept2: job 1's / job 2's submit reservation survives.
		kept1, kept2 bool
		// stripped: the update's token is removed from the comment (logged).
		stripped bool
	}{
		{"job 1's token copied into job 2's update", func(c1, t1, c2, t2 string) JobFields {
			j := job("coscheml:app=heavy-b " + t1)
			j.Modify, j.JobID, j.StoredComment = true, 2, c2
			return j
		}, true, false, true},
		{"job 1's token copied into a comment-only update", func(c1, t1, c2, t2 string) JobFields {
			return JobFields{Comment: "coscheml:app=heavy-b " + t1, UserID: uid, Modify: true, JobID: 2, Set: FieldComment, StoredComment: c2}
		}, true, true, true},
		{"job 1's token, job 2's stored comment carries none", func(c1, t1, c2, t2 string) JobFields {
			j := job("coscheml:app=heavy-b " + t1)
			j.Modify, j.JobID, j.StoredComment = true, 2, "coscheml:app=heavy-b"
			return j
		}, true, true, true},
		{"job 1's whole stored comment as job 2's update", func(c1, t1, c2, t2 string) JobFields {
			j := job(c1)
			j.Modify, j.JobID, j.StoredComment = true, 2, c2
			return j
		}, true, false, true},
		{"the job's own token", func(c1, t1, c2, t2 string) JobFields {
			j := job(c2)
			j.Modify, j.JobID, j.StoredComment = true, 2, c2
			return j
		}, true, false, false},
		{"the job's own token twice", func(c1, t1, c2, t2 string) JobFields {
			j := job(c2 + " " + t2)
			j.Modify, j.JobID, j.StoredComment = true, 2, c2
			return j
		}, true, false, true},
		{"no token in the update: the stored one names the job's decision", func(c1, t1, c2, t2 string) JobFields {
			j := job("coscheml:app=heavy-b")
			j.Modify, j.JobID, j.StoredComment = true, 2, c2
			return j
		}, true, false, false},
		{"admin (the re-decide loop) with the job's own token", func(c1, t1, c2, t2 string) JobFields {
			j := job(c2)
			j.UserID, j.SubmitUID, j.Admin, j.Modify, j.JobID, j.StoredComment = 0, 0, true, true, 2, c2
			return j
		}, true, false, false},
		{"admin with another job's token", func(c1, t1, c2, t2 string) JobFields {
			j := job("coscheml:app=heavy-b " + t1)
			j.UserID, j.SubmitUID, j.Admin, j.Modify, j.JobID, j.StoredComment = 0, 0, true, true, 2, c2
			return j
		}, true, false, true},
		{"admin, no stored comment: the update's token counts", func(c1, t1, c2, t2 string) JobFields {
			j := job(c2)
			j.UserID, j.SubmitUID, j.Admin, j.Modify, j.JobID = 0, 0, true, true, 2
			return j
		}, true, false, false},
		{"user, no stored comment: no token counts", func(c1, t1, c2, t2 string) JobFields {
			j := job(c2)
			j.Modify, j.JobID = true, 2
			return j
		}, true, true, true},
		{"another uid presents the stored token", func(c1, t1, c2, t2 string) JobFields {
			j := job(c2)
			j.UserID, j.Modify, j.JobID, j.StoredComment = uid+1, true, 2, c2
			return j
		}, true, true, true},
		{"a submission carrying a token", func(c1, t1, c2, t2 string) JobFields {
			return job("coscheml:app=light-a " + t1)
		}, true, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			r1 := f.e.Decide(job("coscheml:app=heavy-a"))
			r2 := f.e.Decide(job("coscheml:app=heavy-b"))
			d1, d2 := comment.ParseComment(r1.Comment), comment.ParseComment(r2.Comment)
			if r1.Code != Rewrite || r2.Code != Rewrite || d1.DecisionID == "" || d2.DecisionID == "" {
				t.Fatalf("submissions: %+v / %+v", r1, r2)
			}
			t1, t2 := comment.FormatToken(d1.DecisionID, d1.Shards), comment.FormatToken(d2.DecisionID, d2.Shards)
			u := tc.upd(r1.Comment, t1, r2.Comment, t2)
			r := f.e.Decide(u)
			ids := f.reserved()
			if got := contains(ids, d1.DecisionID); got != tc.kept1 {
				t.Errorf("job 1's reservation kept = %v, want %v (result %+v)", got, tc.kept1, r)
			}
			if got := contains(ids, d2.DecisionID); got != tc.kept2 {
				t.Errorf("job 2's reservation kept = %v, want %v (result %+v)", got, tc.kept2, r)
			}
			stored := u.Comment
			if r.Code == Rewrite && r.Comment != "" {
				stored = r.Comment
			}
			if strings.Contains(stored, d1.DecisionID) && (u.StoredComment == "" || !strings.Contains(u.StoredComment, d1.DecisionID)) {
				t.Errorf("job 1's token reaches job 2's stored comment: %q", stored)
			}
			if n := strings.Count(stored, "coscheml-id="); n > 1 {
				t.Errorf("%d tokens in the stored comment %q", n, stored)
			}
			if got := strings.Contains(logOf(r), "removed a coscheml-id token"); got != tc.stripped {
				t.Errorf("token removed (logged) = %v, want %v: %q", got, tc.stripped, logOf(r))
			}
		})
	}
}

// TestCommentOnlyUpdateKeepsToken: an update that sets the comment without the
// job's token (the placement is kept) keeps the job's own token, so the
// Prolog still finds the decision the job was placed by.
func TestCommentOnlyUpdateKeepsToken(t *testing.T) {
	f := newFixture(t, nil)
	r := f.e.Decide(job("coscheml:app=heavy-a"))
	d := comment.ParseComment(r.Comment)
	tok := comment.FormatToken(d.DecisionID, d.Shards)
	u := JobFields{Comment: "coscheml:app=heavy-a nightly run", UserID: 1000, Modify: true, JobID: 7, Set: FieldComment, StoredComment: r.Comment}
	got := f.e.Decide(u)
	if got.Code != Rewrite || got.Comment != "coscheml:app=heavy-a nightly run "+tok {
		t.Fatalf("comment-only update: %+v, want the comment with %s", got, tok)
	}
	if !contains(f.reserved(), d.DecisionID) {
		t.Fatal("a comment-only update dropped the job's reservation")
	}
}

// TestUnknownProfileEveryPath: unknown_profile applies wherever a tag is set:
// at submit, in an update that re-decides and in a comment-only update (which
// used to be accepted unchanged with a tag the submission was refused for).
func TestUnknownProfileEveryPath(t *testing.T) {
	const stored = "coscheml:app=heavy-a coscheml-id=c1-1-000000000000:2"
	commentOnly := func(c, storedComment string) JobFields {
		return JobFields{Comment: c, UserID: 1000, SubmitUID: 1000, Modify: true, JobID: 9, Set: FieldComment, StoredComment: storedComment}
	}
	withTres := func(c string) JobFields {
		j := job(c)
		j.Modify, j.JobID, j.StoredComment, j.Set = true, 9, stored, FieldComment|FieldTres
		return j
	}
	tests := []struct {
		name string
		mode string
		job  JobFields
		code Code
		msg  string // in UserMsg ("" none)
	}{
		{"submit, reject", config.UnknownReject, job("coscheml:app=nosuch"), Reject, "unknown application profile 'nosuch'"},
		{"comment-only update, reject", config.UnknownReject, commentOnly("coscheml:app=nosuch", stored), Reject, "unknown application profile 'nosuch'"},
		{"comment-only update of an untagged job, reject", config.UnknownReject, commentOnly("coscheml:app=nosuch", ""), Reject, "unknown application profile"},
		{"update with a GPU request, reject", config.UnknownReject, withTres("coscheml:app=nosuch"), Reject, "unknown application profile"},
		{"comment-only update keeping the stored tag", config.UnknownReject, commentOnly("coscheml:app=gone more words", "coscheml:app=gone"), Unchanged, ""},
		{"comment-only update to a known tag", config.UnknownReject, commentOnly("coscheml:app=light-a", stored), Unchanged, ""},
		{"comment-only update, exclusive: warned", config.UnknownExclusive, commentOnly("coscheml:app=nosuch", stored), Unchanged, "warning: unknown application profile"},
		{"comment-only update, bootstrap: warned", config.UnknownBootstrap, commentOnly("coscheml:app=nosuch", stored), Unchanged, "warning: unknown application profile"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *config.Config) { c.UnknownProfile = tc.mode })
			r := f.e.Decide(tc.job)
			if r.Code != tc.code {
				t.Fatalf("code %v, want %v: %+v", r.Code, tc.code, r)
			}
			if tc.msg == "" && r.UserMsg != "" || !strings.Contains(r.UserMsg, tc.msg) {
				t.Fatalf("user message %q, want %q", r.UserMsg, tc.msg)
			}
		})
	}
}

// forgedTokens is a comment of n forged coscheml-id tokens (well-formed, wrong MAC).
func forgedTokens(n int) string {
	var b strings.Builder
	b.WriteString("coscheml:app=heavy-a")
	for i := 0; i < n; i++ {
		b.WriteString(" coscheml-id=c1-")
		b.WriteString(strings.Repeat("z", 1+i%5))
		b.WriteString("-0123456789ab:2")
	}
	return b.String()
}

// TestLongCommentNoTokenCheck: the comment's length limit applies before any
// token is parsed or verified. 1 MiB of token-like words at job_modify used to
// be HMAC-checked word by word (26-49 ms of slurmctld's time).
func TestLongCommentNoTokenCheck(t *testing.T) {
	own := "coscheml:app=heavy-a coscheml-id=c1-1-0123456789ab:2"
	tests := []struct {
		name    string
		comment string
		stored  string
		maxMACs uint64 // to verify the update's tokens (the stored one, twice: submit and job form)
	}{
		{"forged tokens over the limit", forgedTokens(4000), "", 0},
		{"forged tokens over the limit, job with a stored token", forgedTokens(4000), own, 2},
		{"the stored token repeated over the limit", strings.Repeat(own+" ", 2000), own, 2},
		{"forged tokens within the limit", forgedTokens(20), own, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			u := job(tc.comment)
			u.Modify, u.JobID, u.StoredComment = true, 42, tc.stored
			before := macsComputed()
			r := f.e.Decide(u)
			allowed := tc.maxMACs
			if r.Code == Rewrite {
				allowed++ // the new decision's id is signed
			}
			if n := macsComputed() - before; n > allowed {
				t.Fatalf("%d MACs computed for a %d-byte comment, want at most %d", n, len(tc.comment), allowed)
			}
			if r.Code == Rewrite && strings.Contains(r.Comment, "-0123456789ab") || r.Code == Unchanged {
				t.Fatalf("a token of the update survives: %v %.200q", r.Code, r.Comment)
			}
		})
	}
}

// BenchmarkScreenLongComment: a 1 MiB comment of token-like words at
// job_modify (the length limit comes first: no token is verified).
func BenchmarkScreenLongComment(b *testing.B) {
	c := forgedTokens(1 << 20 / 28)
	key := []byte("0123456789abcdef0123456789abcdef")
	j := JobFields{Comment: c, Modify: true, UserID: 1000, JobID: 42, StoredComment: "coscheml:app=a coscheml-id=c1-1-0123456789ab:2"}
	b.SetBytes(int64(len(c)))
	for i := 0; i < b.N; i++ {
		screen(j, key, false)
	}
}

// TestRunningJobKeepsItsTag: the coscheml directive of a running job cannot
// be changed by its user (its placement and the node's profiling were decided
// for it); other words of the comment can, and admins may.
func TestRunningJobKeepsItsTag(t *testing.T) {
	tests := []struct {
		name    string
		comment string
		set     FieldSet
		admin   bool
		jobID   uint32 // 55 runs, 56 is pending
		code    Code
	}{
		{"retag, comment only", "coscheml:app=light-a", FieldComment, false, 55, Reject},
		{"retag with a GPU request", "coscheml:app=light-a", FieldComment | FieldTres, false, 55, Reject},
		{"class changed", "coscheml:app=heavy-a,class=train", FieldComment, false, 55, Reject},
		{"directive removed", "just text", FieldComment, false, 55, Reject},
		{"same directive, more words", "coscheml:app=heavy-a see ticket 12", FieldComment, false, 55, Rewrite},
		{"admin retag", "coscheml:app=light-a", FieldComment, true, 55, Rewrite},
		{"pending job retag", "coscheml:app=light-a", FieldComment, false, 56, Rewrite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			a := f.e.Decide(job("coscheml:app=heavy-a"))
			d := comment.ParseComment(a.Comment)
			store, _ := residency.Open(f.cfg.ResidencyDir)
			if err := store.Start(residency.Entry{JobID: "55", Node: "n1", GPUs: []int{0}, Shards: 2, Tag: "heavy-a", DecisionID: d.DecisionID,
				Start: f.now, Expires: f.now.Add(time.Hour)}); err != nil {
				t.Fatal(err)
			}
			f.e.Reload()
			u := job(tc.comment)
			u.Modify, u.JobID, u.Set, u.StoredComment, u.Admin = true, tc.jobID, tc.set, a.Comment, tc.admin
			if tc.set&FieldTres == 0 {
				u.TresPerNode = ""
			}
			r := f.e.Decide(u)
			if r.Code != tc.code {
				t.Fatalf("code %v, want %v: %+v", r.Code, tc.code, r)
			}
			if tc.code == Reject && !strings.Contains(r.UserMsg, "running") {
				t.Fatalf("refusal does not say why: %q", r.UserMsg)
			}
		})
	}
}

// TestDecideCutsLogOnRunes: Decide bounds its log lines on a character
// boundary, whatever the bound.
func TestDecideCutsLogOnRunes(t *testing.T) {
	note := "profile dir /srv/prøfiles/ünreadable: état inconnu " + strings.Repeat("é", 20)
	for n := 40; n < 80; n++ {
		f := newFixture(t, nil)
		e := New(f.sources(), Options{Now: f.clock, MaxLogLen: n})
		e.note("x", note)
		r := e.Decide(job("coscheml:app=light-a"))
		e.Close()
		if !utf8.ValidString(r.Log) || !utf8.ValidString(r.Line) {
			t.Fatalf("MaxLogLen %d: log cut inside a character: %q / %q", n, r.Log, r.Line)
		}
		if len(strings.TrimSuffix(r.Log, "...")) > n {
			t.Fatalf("MaxLogLen %d: %d bytes kept", n, len(r.Log))
		}
	}
}

// BenchmarkDecideLongComment: a whole job_modify decision of a 1 MiB comment
// of token-like words (what slurmctld's thread waits for).
func BenchmarkDecideLongComment(b *testing.B) {
	f := newFixture(b, nil)
	u := job(forgedTokens(1 << 20 / 28))
	u.Modify, u.JobID, u.Set = true, 42, FieldComment
	u.TresPerNode = ""
	b.SetBytes(int64(len(u.Comment)))
	for i := 0; i < b.N; i++ {
		f.e.Decide(u)
	}
}
