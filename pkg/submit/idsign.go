// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/coscheml/coscheml/pkg/comment"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// Decision ids are signed: <prefix>-<seq>-<mac>, where mac is an HMAC-SHA256
// (first 12 hex digits) of the unsigned id, the shards of the token, the job's
// uid and, for ids issued by job_modify, the job id, under the controller's
// decision key. Comments are world-readable (`squeue -o %k`), so an id alone
// proves nothing; only an id this controller issued for this uid (and job)
// counts, and at job_modify only the token the job's own stored comment
// carries: the same user's token of another job is no key to that job's
// reservation. The plugin removes every other coscheml-id token from a comment, so
// what slurmd hands the Prolog carries only tokens the plugin wrote for that
// job: the node hooks need no key (docs/slurm-integration.md).

// macLen is the hex digits of the MAC kept in an id (48 bits: a forger guesses
// blindly; the id stays within the token grammar's 32 characters).
const macLen = 12

// keyMinLen and keyMaxLen bound the key file.
const (
	keyMinLen = 32
	keyMaxLen = 4096
)

func idMAC(key []byte, base string, shards int, uid uint32, jobID string) string {
	var out [macLen]byte
	return string(appendMAC(out[:0], key, []byte(base), shards, uid, jobID))
}

// appendMAC appends idMAC's text to b (no allocation when b has room).
func appendMAC(b, key, base []byte, shards int, uid uint32, jobID string) []byte {
	m := &macs
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setKeyLocked(key)
	m.computed++
	// The inner hash's input, the key's inner pad and then the message, is
	// built in the cache's buffer (no allocation once it has grown).
	msg := append(m.inner[:0], m.ipad[:]...)
	msg = append(msg, "coscheml-id v1\x00"...)
	msg = append(append(msg, base...), 0)
	msg = append(strconv.AppendInt(msg, int64(shards), 10), 0)
	msg = append(strconv.AppendUint(msg, uint64(uid), 10), 0)
	msg = append(msg, jobID...)
	m.inner = msg[:0]
	sum := sha256.Sum256(msg)
	copy(m.outer[sha256.BlockSize:], sum[:])
	sum = sha256.Sum256(m.outer[:])
	return hex.AppendEncode(b, sum[:macLen/2])
}

// macs keeps the HMAC-SHA256 pads of the last key used. The MAC is computed
// as RFC 2104 defines it, two SHA-256 sums: of the inner pad and the message,
// then of the outer pad and that sum. crypto/hmac's Reset restored its keyed
// state by unmarshalling two SHA-256 states per id instead, the id's largest
// cost in a decision with cold caches (docs/performance-submit.md).
// Decisions run one at a time in slurmctld (the worker), so the lock is
// uncontended.
var macs macCache

type macCache struct {
	mu    sync.Mutex
	keyed bool
	key   string
	ipad  [sha256.BlockSize]byte
	inner []byte                               // ipad and the message (reused)
	outer [sha256.BlockSize + sha256.Size]byte // opad and the inner sum
	// computed counts the MACs computed, so tests can bound the work a
	// hostile comment causes.
	computed uint64
}

// macsComputed is how many MACs were computed so far.
func macsComputed() uint64 {
	macs.mu.Lock()
	defer macs.mu.Unlock()
	return macs.computed
}

// setKeyLocked computes key's pads unless they are the cached ones.
func (m *macCache) setKeyLocked(key []byte) {
	if m.keyed && m.key == string(key) {
		return
	}
	var k [sha256.BlockSize]byte
	if len(key) > sha256.BlockSize {
		sum := sha256.Sum256(key) // RFC 2104: a longer key is hashed first
		copy(k[:], sum[:])
	} else {
		copy(k[:], key)
	}
	for i, c := range k {
		m.ipad[i], m.outer[i] = c^0x36, c^0x5c
	}
	m.keyed, m.key = true, string(key)
}

// signID returns the signed form of an unsigned id.
func signID(key []byte, base string, shards int, uid uint32, jobID string) string {
	return signIDBytes(key, []byte(base), shards, uid, jobID)
}

// signIDBytes is signID built on the stack: the id string is its one
// allocation (a decision's id is ~30 bytes).
func signIDBytes(key, base []byte, shards int, uid uint32, jobID string) string {
	var buf [96]byte
	return string(appendMAC(append(append(buf[:0], base...), '-'), key, base, shards, uid, jobID))
}

// verifyID says whether id was signed with key for this uid, either at submit
// (no job id) or by a job_modify of this job.
func verifyID(key []byte, id string, shards int, uid uint32, jobID string) bool {
	i := strings.LastIndexByte(id, '-')
	if len(key) == 0 || i <= 0 || len(id)-i-1 != macLen {
		return false
	}
	base, mac := id[:i], id[i+1:]
	if hmac.Equal([]byte(mac), []byte(idMAC(key, base, shards, uid, ""))) {
		return true
	}
	return jobID != "" && hmac.Equal([]byte(mac), []byte(idMAC(key, base, shards, uid, jobID)))
}

// screen removes from j's comment every coscheml-id token the plugin did not
// issue for this job. At submit no token counts (a new job has no earlier
// decision). At job_modify the one token that counts is the job's own: the
// first token of its stored comment (what slurmctld holds for this job, so a
// token copied from another job of the same user never matches), when it
// verifies with key for j's uid (and job), or, from an admin (root or
// SlurmUser: the re-decide loop's `scontrol update`, whose uid is not the
// job's), when it is well-formed; for an administrator's update of a job
// without a stored comment, the update's first well-formed token. The update's comment may repeat that token
// once; every other token word is removed. A comment longer than
// comment.MaxCommentLen has all its tokens removed unread, so a long comment
// costs no token parsing or MAC: at most the stored token is verified, once.
func screen(j JobFields, key []byte, admin bool) (s screened) {
	s.comment = j.Comment
	switch {
	case j.Modify && admin && j.StoredComment == "" && len(j.Comment) <= comment.MaxCommentLen:
		// An administrator's update of a job with no stored comment (or from
		// a shim that does not pass it): the update's first well-formed
		// token counts, as the re-decide loop's always carries the job's own.
		s.own, s.prevID = firstToken(j.Comment)
	case j.Modify:
		s.own, s.prevID = ownToken(j, key, admin)
	}
	if !strings.Contains(j.Comment, tokenPrefix) {
		return s
	}
	// The length limit comes first: no word of an overlong comment is read
	// as a token (no parse, no MAC); all its token words go, the job's own
	// too (its earlier decision still counts through the stored comment).
	keepOwn := s.own
	if len(j.Comment) > comment.MaxCommentLen {
		keepOwn = ""
	}
	words := strings.Fields(j.Comment)
	kept := words[:0:0]
	for _, w := range words {
		if !strings.HasPrefix(w, tokenPrefix) {
			kept = append(kept, w)
			continue
		}
		if keepOwn != "" && w == keepOwn && !s.ownKept {
			s.ownKept = true
			kept = append(kept, w)
			continue
		}
		s.stripped = true
	}
	if s.stripped {
		s.comment = strings.Join(kept, " ")
	}
	return s
}

// screened is what screen makes of a comment.
type screened struct {
	comment string // the comment to decide on
	own     string // the job's own token word ("" when none counts)
	prevID  string // the id of the job's earlier decision, from own
	ownKept bool   // comment still holds own
	// stripped: a token was removed (the stored comment must be replaced
	// by the cleaned one).
	stripped bool
}

// firstToken is the first well-formed token word of c and its decision id.
func firstToken(c string) (word, id string) {
	for _, w := range strings.Fields(c) {
		if !strings.HasPrefix(w, tokenPrefix) {
			continue
		}
		if d := comment.ParseComment(w); d.Err == nil && d.DecisionID != "" {
			return w, d.DecisionID
		}
	}
	return "", ""
}

// ownToken is the token word of j's stored comment and its decision id, when
// the token counts for this update (see screen); "" otherwise.
func ownToken(j JobFields, key []byte, admin bool) (word, id string) {
	// The first token that starts a word (ParseComment's "first wins").
	for rest, at := j.StoredComment, 0; ; {
		i := strings.Index(rest, tokenPrefix)
		if i < 0 {
			return "", ""
		}
		// The word boundary as strings.Fields sees it: the rune before, decoded
		// (a lone byte 0x85 or 0xa0 is not the space U+0085 or U+00A0).
		if prev, _ := utf8.DecodeLastRuneInString(j.StoredComment[:at+i]); at+i == 0 || unicode.IsSpace(prev) {
			word = rest[i:]
			break
		}
		rest, at = rest[i+1:], at+i+1
	}
	if end := strings.IndexFunc(word, unicode.IsSpace); end >= 0 {
		word = word[:end]
	}
	d := comment.ParseComment(word)
	if d.Err != nil || d.DecisionID == "" {
		return "", ""
	}
	if !admin {
		jobID := ""
		if j.JobID != 0 && j.JobID != NoVal {
			jobID = strconv.FormatUint(uint64(j.JobID), 10)
		}
		if !verifyID(key, d.DecisionID, d.Shards, j.UserID, jobID) {
			return "", ""
		}
	}
	return word, d.DecisionID
}

const tokenPrefix = "coscheml-id="

// StripTokens removes every coscheml-id token from a comment; the bridge uses it
// when no engine is there to verify one (every job passes through, but no
// user-written token may reach the Prolog). ok is false when there was none.
func StripTokens(j JobFields) (Result, bool) {
	s := screen(JobFields{Comment: j.Comment}, nil, false)
	if !s.stripped {
		return Result{}, false
	}
	return Result{Code: Rewrite, Comment: s.comment,
		Log: "removed a coscheml-id token the plugin did not issue from the comment of uid " + strconv.FormatUint(uint64(j.UserID), 10)}, true
}

// loadKey reads the decision key at path, creating it (mode 0600) when it is
// missing. A key readable by group or others is refused: it would let users
// sign ids.
func loadKey(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("decision_key is empty")
	}
	b, err := readKey(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := createKey(path); err != nil {
			return nil, err
		}
		b, err = readKey(path)
	}
	return b, err
}

func readKey(path string) ([]byte, error) {
	f, err := safeopen.Regular(path, safeopen.NoFollow)
	if err != nil {
		return nil, fmt.Errorf("decision key: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("decision key %s: %w", path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("decision key %s has mode %04o: others could sign decision ids; run `chmod 600 %s`", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, keyMaxLen+1))
	if err != nil {
		return nil, fmt.Errorf("decision key %s: %w", path, err)
	}
	if len(b) < keyMinLen || len(b) > keyMaxLen {
		return nil, fmt.Errorf("decision key %s: %d bytes, want %d..%d", path, len(b), keyMinLen, keyMaxLen)
	}
	return b, nil
}

// createKey writes 32 random bytes to a temporary file and links it to path, so
// two controllers starting at once end with one key (the second link fails and
// that controller reads the first's key).
func createKey(path string) error {
	key := make([]byte, keyMinLen)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("decision key: %w", err)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("decision key: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".decision.key-*")
	if err != nil {
		return fmt.Errorf("decision key: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.Write(key)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("decision key %s: %w", path, err)
	}
	return nil
}
