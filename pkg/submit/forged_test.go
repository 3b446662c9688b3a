// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/config"
	"github.com/coscheml/coscheml/pkg/residency"
)

func (f *fixture) reserved() []string {
	f.e.view.mu.Lock()
	defer f.e.view.mu.Unlock()
	var ids []string
	for _, r := range f.e.view.res.list {
		ids = append(ids, r.id)
	}
	return ids
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// A decision id is visible to everyone (squeue -o %k) and was guessable: only an
// id this controller issued for this uid (and job) may drop or confirm a
// reservation; every other coscheml-id token is removed from the comment.
func TestForgedDecisionIDs(t *testing.T) {
	const victimUID, attackerUID = 51000, 52000
	tests := []struct {
		name string
		// job builds the attacker's (or the victim's) job from the victim's
		// decision id and token word.
		job func(id, tok string) JobFields
		// kept: the victim's reservation must survive.
		kept bool
		// strippedTok: the victim's token must not be in the stored comment.
		strippedTok bool
	}{
		{"other user submits a tagged job with the victim's id", func(id, tok string) JobFields {
			j := job("coscheml:app=heavy-b " + tok)
			j.UserID = attackerUID
			return j
		}, true, true},
		{"other user submits an untagged job with the victim's id", func(id, tok string) JobFields {
			j := job("just running " + tok)
			j.UserID = attackerUID
			return j
		}, true, true},
		{"other user updates their job with the victim's id", func(id, tok string) JobFields {
			j := job("coscheml:app=heavy-b " + tok)
			j.UserID, j.Modify, j.JobID = attackerUID, true, 77
			return j
		}, true, true},
		{"other user updates only the comment", func(id, tok string) JobFields {
			j := JobFields{Comment: "coscheml:app=heavy-b " + tok, UserID: attackerUID, Modify: true, JobID: 77}
			return j
		}, true, true},
		{"same user, guessed unsigned id", func(id, tok string) JobFields {
			base := id[:strings.LastIndexByte(id, '-')]
			j := job("coscheml:app=heavy-b " + comment.FormatToken(base, 2))
			j.UserID, j.Modify, j.JobID = victimUID, true, 78
			return j
		}, true, true},
		{"same user, id with another shard count", func(id, tok string) JobFields {
			j := job("coscheml:app=heavy-b " + comment.FormatToken(id, 1))
			j.UserID, j.Modify, j.JobID = victimUID, true, 79
			return j
		}, true, true},
		{"an admin's update (the re-decide loop) with the job's token", func(id, tok string) JobFields {
			j := job("coscheml:app=heavy-a " + tok)
			j.UserID, j.SubmitUID, j.Admin, j.Modify, j.JobID = 0, 0, true, true, 56
			j.StoredComment = "coscheml:app=heavy-a " + tok
			return j
		}, false, false},
		{"the job's own update (same user, its token)", func(id, tok string) JobFields {
			j := job("coscheml:app=heavy-a " + tok)
			j.UserID, j.Modify, j.JobID = victimUID, true, 55
			j.StoredComment = "coscheml:app=heavy-a " + tok
			return j
		}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil)
			v := job("coscheml:app=heavy-a")
			v.UserID = victimUID
			vr := f.e.Decide(v)
			d := comment.ParseComment(vr.Comment)
			if vr.Code != Rewrite || d.DecisionID == "" {
				t.Fatalf("victim: %+v", vr)
			}
			tok := comment.FormatToken(d.DecisionID, d.Shards)
			r := f.e.Decide(tc.job(d.DecisionID, tok))
			if got := contains(f.reserved(), d.DecisionID); got != tc.kept {
				t.Fatalf("victim's reservation kept = %v, want %v (result %+v)", got, tc.kept, r)
			}
			stored := r.Comment
			if r.Code == Unchanged {
				stored = tc.job(d.DecisionID, tok).Comment
			}
			if tc.strippedTok {
				if r.Code == Reject {
					return
				}
				if r.Code != Rewrite || strings.Contains(stored, d.DecisionID) {
					t.Fatalf("the forged token stays in the comment: %+v", r)
				}
				if !strings.Contains(logOf(r), "removed a coscheml-id token") {
					t.Errorf("no log line for the removed token: %q", logOf(r))
				}
			}
		})
	}
}

// The Prolog records the id from the comment; an entry with the victim's id on
// another node (or of another job once the reservation is bound) confirms nothing.
func TestForgedConfirmation(t *testing.T) {
	f := newFixture(t, nil)
	v := f.e.Decide(job("coscheml:app=heavy-a")) // pinned to n1
	d := comment.ParseComment(v.Comment)
	if v.ReqNodes != "n1" {
		t.Fatalf("victim: %+v", v)
	}
	store, _ := residency.Open(f.cfg.ResidencyDir)
	en := residency.Entry{JobID: "900", Node: "n2", GPUs: []int{0}, Shards: 2, Tag: "heavy-a", DecisionID: d.DecisionID, Start: f.now, Expires: f.now.Add(time.Hour)}
	if err := store.Start(en); err != nil {
		t.Fatal(err)
	}
	f.e.Reload()
	if !contains(f.reserved(), d.DecisionID) {
		t.Fatal("an entry on another node confirmed the reservation")
	}
	// The right node confirms it.
	en.JobID, en.Node = "901", "n1"
	if err := store.Start(en); err != nil {
		t.Fatal(err)
	}
	f.e.Reload()
	if contains(f.reserved(), d.DecisionID) {
		t.Fatal("the job's own entry did not confirm the reservation")
	}
}

// Ids verify for the uid, shards and job they were signed for, and nothing else.
func TestSignedIDs(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	id := signID(key, "mx2uzeo0-1f", 2, 1000, "")
	idJob := signID(key, "mx2uzeo0-1g", 2, 1000, "55")
	if len(id) > 32 || comment.ParseComment(comment.FormatToken(id, 2)).DecisionID != id {
		t.Fatalf("id %q does not fit the token grammar", id)
	}
	tests := []struct {
		name   string
		key    []byte
		id     string
		shards int
		uid    uint32
		job    string
		want   bool
	}{
		{"issued at submit", key, id, 2, 1000, "", true},
		{"issued at submit, presented by a job update", key, id, 2, 1000, "55", true},
		{"other uid", key, id, 2, 1001, "", false},
		{"other shards", key, id, 3, 1000, "", false},
		{"other key", []byte("another key of thirty-two bytes!"), id, 2, 1000, "", false},
		{"no key", nil, id, 2, 1000, "", false},
		{"unsigned", key, "mx2uzeo0-1f", 2, 1000, "", false},
		{"mac changed", key, id[:len(id)-1] + "0", 2, 1000, "", id[len(id)-1] == '0'},
		{"issued to job 55, job 55", key, idJob, 2, 1000, "55", true},
		{"issued to job 55, job 56", key, idJob, 2, 1000, "56", false},
		{"issued to job 55, at submit", key, idJob, 2, 1000, "", false},
	}
	for _, tc := range tests {
		if got := verifyID(tc.key, tc.id, tc.shards, tc.uid, tc.job); got != tc.want {
			t.Errorf("%s: verify = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The key is created 0600 at first start and read back; a key others can read
// is refused (ids are then signed with a key of this start only, and logged).
func TestDecisionKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "decision.key")
	k1, err := loadKey(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != keyMinLen {
		t.Fatalf("created key: %v, %v", fi.Mode(), err)
	}
	k2, err := loadKey(path)
	if err != nil || string(k1) != string(k2) {
		t.Fatalf("key not read back: %v", err)
	}
	for _, tc := range []struct {
		name    string
		mode    os.FileMode
		content string
		errHas  string
	}{
		{"group readable", 0o640, strings.Repeat("k", 32), "chmod 600"},
		{"world readable", 0o644, strings.Repeat("k", 32), "chmod 600"},
		{"too short", 0o600, "short", "bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(p, []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, tc.mode)
			if _, err := loadKey(p); err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err %v, want %q", err, tc.errHas)
			}
		})
	}
	f := newFixture(t, func(c *config.Config) { c.DecisionKey = filepath.Join(dir, "world-readable") })
	r := f.e.Decide(job("coscheml:app=light-a"))
	if r.Code != Rewrite || !strings.Contains(logOf(r), "signed with a key of this start only") {
		t.Fatalf("unusable key: %+v", r)
	}
}

// FuzzScreen: whatever a user writes in a comment, no coscheml-id token survives
// a submission; at job_modify only the job's own token does (the first of its
// stored comment, signed for that uid and job), once, and only in a comment
// within the length limit; the other words are kept in order.
func FuzzScreen(f *testing.F) {
	key := []byte("0123456789abcdef0123456789abcdef")
	good := comment.FormatToken(signID(key, "mx2uzeo0-1f", 2, 1000, ""), 2)
	other := comment.FormatToken(signID(key, "mx2uzeo0-1g", 2, 1000, ""), 2)
	for _, s := range []string{"", "coscheml:app=a", "coscheml:app=a " + good, good + " " + good, "x coscheml-id=mx-1:2 y",
		"coscheml-id=", "coscheml-id=a:b:c", "\tcoscheml-id=\x00:1\n" + good, other + " " + good,
		strings.Repeat("a "+good+"\u3000x"+other+" ", 40)} {
		for _, stored := range []string{"", "coscheml:app=a " + good, "x" + good + " " + other} {
			f.Add(s, stored, false, uint32(1000))
			f.Add(s, stored, true, uint32(1000))
			f.Add(s, stored, true, uint32(1001))
		}
	}
	f.Fuzz(func(t *testing.T, c, stored string, modify bool, uid uint32) {
		j := JobFields{Comment: c, StoredComment: stored, Modify: modify, UserID: uid, JobID: 77}
		s := screen(j, key, false)
		if !s.stripped && s.comment != c {
			t.Fatalf("comment changed without a removed token: %q -> %q", c, s.comment)
		}
		if s.own != "" {
			d := comment.ParseComment(s.own)
			if !modify || d.DecisionID != s.prevID || !slices.Contains(strings.Fields(stored), s.own) || !verifyID(key, d.DecisionID, d.Shards, uid, "77") {
				t.Fatalf("own token %q counts (modify %v, uid %d, stored %q)", s.own, modify, uid, stored)
			}
		}
		var others []string
		for _, w := range strings.Fields(c) {
			if !strings.HasPrefix(w, tokenPrefix) {
				others = append(others, w)
			}
		}
		var kept []string
		tokens := 0
		for _, w := range strings.Fields(s.comment) {
			if strings.HasPrefix(w, tokenPrefix) {
				if tokens++; w != s.own || tokens > 1 || len(c) > comment.MaxCommentLen {
					t.Fatalf("token %q kept (modify %v, uid %d, own %q)", w, modify, uid, s.own)
				}
				continue
			}
			kept = append(kept, w)
		}
		if strings.Join(kept, " ") != strings.Join(others, " ") {
			t.Fatalf("other words changed: %q -> %q", c, s.comment)
		}
	})
}

// TestIDMACMatchesHMAC: the cached keyed HMAC (macs) gives the MAC a fresh
// HMAC-SHA256 of the id's fields gives, also when decisions alternate keys
// (a reload with a new decision key, an engine without one).
func TestIDMACMatchesHMAC(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 64)
	tests := []struct {
		key    []byte
		base   string
		shards int
		uid    uint32
		jobID  string
	}{
		{k1, "c1-1", 2, 1000, ""},
		{k1, "c1-2", 4, 0, "77"},
		{k2, "c1-2", 4, 0, "77"},
		{k1, "c1-zz", 0, 4294967295, "4294967295"},
		{k2, strings.Repeat("x", 200), 1, 1, ""},           // longer than idMAC's stack buffer
		{bytes.Repeat([]byte{3}, 65), "c1-3", 1, 5, ""},    // longer than a SHA-256 block: hashed first
		{bytes.Repeat([]byte{4}, 4096), "c1-4", 8, 5, "9"}, // keyMaxLen
		{k1[:1], "c1-5", 1, 5, ""},                         // shorter than any key file
		{k1, "c1-6", 1, 5, ""},                             // k1 again after other keys
		{[]byte{}, "c1-7", 1, 5, ""},                       // no key at all
	}
	for _, tt := range tests {
		h := hmac.New(sha256.New, tt.key)
		io.WriteString(h, "coscheml-id v1\x00"+tt.base+"\x00"+strconv.Itoa(tt.shards)+"\x00"+strconv.FormatUint(uint64(tt.uid), 10)+"\x00"+tt.jobID)
		want := hex.EncodeToString(h.Sum(nil))[:macLen]
		if got := idMAC(tt.key, tt.base, tt.shards, tt.uid, tt.jobID); got != want {
			t.Errorf("idMAC(%d-byte key, %q, %d, %d, %q) = %s, want %s", len(tt.key), tt.base, tt.shards, tt.uid, tt.jobID, got, want)
		}
	}
}
