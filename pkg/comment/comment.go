// SPDX-License-Identifier: Apache-2.0

// Package comment is the grammar of the job comment that carries a coscheml
// directive and the plugin's decision token. It is its own package so that the node
// hooks can read a comment without linking the decision engine.
package comment

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/coscheml/coscheml/pkg/profile"
)

// The comment grammar (see docs/slurm-integration.md):
//
//	comment   = { word } ; words are separated by white space
//	directive = "coscheml:" pair { "," pair }      ; at most one per comment
//	pair      = "app=" tag | "class=" ( "hpc" | "train" | "infer" )
//	token     = "coscheml-id=" id ":" shards         ; appended by the plugin itself
//
// The directive may sit anywhere in a longer free-text comment, so sites that already
// use comments keep them. Any other word that mentions "coscheml" (any case) is a
// malformed directive, not free text: a typo such as "coscheml app=x" must be
// answered, not silently run unshared.

// MaxCommentLen bounds a comment that carries a directive; longer ones are refused
// before any parsing (Slurm itself accepts very long comments).
const MaxCommentLen = 1024

const (
	directivePrefix = "coscheml:"
	tokenPrefix     = "coscheml-id="
	grammarHint     = "use --comment=coscheml:app=<tag>[,class=hpc|train|infer]"
)

// Directive is what a job's comment says to coscheml.
type Directive struct {
	Present bool          // the comment mentions coscheml at all
	Tag     string        // valid tag (when Err == nil)
	Class   profile.Class // "" when the comment names none
	Err     error         // malformed directive: message safe to show to the user

	// NearMiss (untagged comments only) is a word that looks like a directive
	// with a misspelt prefix ("cosceml:app=x", "coschemel:app=x"): the job runs
	// untagged, and the user is told so.
	NearMiss string

	DecisionID string // from the plugin's own token ("" if none)
	Shards     int    // shards per GPU the decision asked for (0 = whole GPUs / unknown)
	// GPUs are the GPU indices of a decision of several GPUs ("<id>:<K>:0.3":
	// K shards on each of GPUs 0 and 3; nil for one GPU). Slurm's Prolog
	// environment names only the last GPU of such a job.
	GPUs []int
}

// ParseComment reads a job comment. Untagged comments give Present == false.
func ParseComment(comment string) Directive {
	var d Directive
	if !containsFold(comment, "coscheml") {
		d.NearMiss = nearMiss(comment)
		return d
	}
	d.Present = true
	if len(comment) > MaxCommentLen {
		d.Err = fmt.Errorf("comment of %d characters is longer than %d; %s", len(comment), MaxCommentLen, grammarHint)
		return d
	}
	found := false
	for rest := comment; ; {
		var w string
		if w, rest = nextWord(rest); w == "" {
			break
		}
		switch {
		case strings.HasPrefix(w, tokenPrefix):
			if d.DecisionID != "" {
				continue // a stale token left by an earlier decision; the first wins
			}
			id, shards, gpus, err := parseToken(w[len(tokenPrefix):])
			if err != nil {
				d.Err = err
				return d
			}
			d.DecisionID, d.Shards, d.GPUs = id, shards, gpus
		case strings.HasPrefix(w, directivePrefix):
			if found {
				d.Err = fmt.Errorf("more than one coscheml: directive; %s", grammarHint)
				return d
			}
			found = true
			if err := d.parseBody(w[len(directivePrefix):]); err != nil {
				d.Err = badTagWithSpaces(w, rest, err)
				return d
			}
		case containsFold(w, "coscheml"):
			d.Err = fmt.Errorf("malformed coscheml directive %q; %s", profile.Sanitize(w), grammarHint)
			return d
		}
	}
	if !found {
		// Only our own token: the user removed the directive (job_modify), the job
		// is untagged now.
		d.Present = false
	}
	return d
}

func (d *Directive) parseBody(body string) error {
	// The known keys only: an unknown one is refused at its first use.
	var seenApp, seenClass bool
	for more := true; more; {
		var pair string
		pair, body, more = strings.Cut(body, ",")
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return fmt.Errorf("coscheml directive: %q is not key=value; %s", profile.Sanitize(pair), grammarHint)
		}
		if k == "app" && seenApp || k == "class" && seenClass {
			return fmt.Errorf("coscheml directive: key %q given twice", profile.Sanitize(k))
		}
		switch k {
		case "app":
			seenApp = true
			if err := profile.ValidateTag(v); err != nil {
				return err
			}
			d.Tag = v
		case "class":
			seenClass = true
			c, err := profile.ParseClass(v)
			if err != nil {
				return err
			}
			d.Class = c
		default:
			return fmt.Errorf("coscheml directive: unknown key %q (known: app, class); %s", profile.Sanitize(k), grammarHint)
		}
	}
	if d.Tag == "" {
		return fmt.Errorf("coscheml directive: app=<tag> missing; %s", grammarHint)
	}
	return nil
}

// badTagWithSpaces quotes the whole value of an invalid tag that a space cut
// short ("coscheml:app=ResNet 18!" is refused as "ResNet 18!", not "ResNet"):
// when the directive ends in app=<value> and words follow, the error names the
// value with the words up to the next coscheml word or the end of the comment.
func badTagWithSpaces(word, rest string, err error) error {
	i := strings.LastIndexByte(word, ',')
	last := word[len(directivePrefix):]
	if i >= len(directivePrefix) {
		last = word[i+1:]
	}
	value, isApp := strings.CutPrefix(last, "app=")
	if !isApp || profile.ValidateTag(value) == nil || strings.TrimSpace(rest) == "" {
		return err
	}
	var b strings.Builder
	b.WriteString(value)
	for n := 0; n < 8; n++ { // a tag is at most 64 characters: a few words say enough
		var w string
		if w, rest = nextWord(rest); w == "" || containsFold(w, "coscheml") {
			break
		}
		b.WriteByte(' ')
		b.WriteString(w)
	}
	if whole := profile.ValidateTag(b.String()); whole != nil {
		return fmt.Errorf("%w (a tag is one word)", whole)
	}
	return err
}

// nearMissMax is the most edits (a letter added, dropped, changed, or two
// swapped) between a word's prefix and "coscheml" that still reads as a typo.
const nearMissMax = 2

// nearMiss returns the first word of an untagged comment whose part before a
// ':' is a few edits from "coscheml" ("cosceml:app=x", "coschemel:app=x"), ""
// when none. It runs on every untagged job: one IndexByte scan, and an edit
// distance only for prefixes of a plausible length.
func nearMiss(comment string) string {
	const word = "coscheml"
	for i := 0; i < len(comment); {
		k := strings.IndexByte(comment[i:], ':')
		if k < 0 {
			return ""
		}
		c := i + k
		s := c
		for s > 0 && !asciiSpace(comment[s-1]) && c-s <= len(word)+nearMissMax {
			s--
		}
		if pre := comment[s:c]; (s == 0 || asciiSpace(comment[s-1])) &&
			len(pre) >= len(word)-nearMissMax && len(pre) <= len(word)+nearMissMax &&
			editDistanceFold(pre, word) <= nearMissMax {
			e := c
			for e < len(comment) && !asciiSpace(comment[e]) {
				e++
			}
			return comment[s:e]
		}
		i = c + 1
	}
	return ""
}

func asciiSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == '\v' || b == '\f'
}

// editDistanceFold is the optimal string alignment distance between a (ASCII
// letters folded to lower case) and the lower-case b, both at most 10 bytes.
func editDistanceFold(a, b string) int {
	var d [12][12]int
	for i := 0; i <= len(a); i++ {
		d[i][0] = i
	}
	for j := 0; j <= len(b); j++ {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		ai := a[i-1]
		if ai >= 'A' && ai <= 'Z' {
			ai += 'a' - 'A'
		}
		for j := 1; j <= len(b); j++ {
			cost := 1
			if ai == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ai == b[j-2] && a[i-2]|0x20 == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

var errBadToken = errors.New("malformed coscheml-id token (it is written by the plugin; remove it)")

// Bounds of a token's GPU list: at most maxTokenGPUs indices, each below
// maxTokenGPUIndex.
const (
	maxTokenGPUs     = 64
	maxTokenGPUIndex = 1 << 10
)

// parseToken reads "<id>:<shards>" or "<id>:<shards>:<gpu>.<gpu>..." (two or
// more distinct GPU indices).
func parseToken(s string) (string, int, []int, error) {
	id, n, ok := strings.Cut(s, ":")
	bad := errBadToken
	if !ok || id == "" || len(id) > 32 || strings.IndexFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-')
	}) >= 0 {
		return "", 0, nil, bad
	}
	n, list, several := strings.Cut(n, ":")
	shards, err := strconv.Atoi(n)
	if err != nil || shards < 0 || shards > 1<<16 || strconv.Itoa(shards) != n {
		return "", 0, nil, bad
	}
	if !several {
		return id, shards, nil, nil
	}
	parts := strings.Split(list, ".")
	if len(parts) < 2 || len(parts) > maxTokenGPUs {
		return "", 0, nil, bad
	}
	gpus := make([]int, 0, len(parts))
	for _, p := range parts {
		g, err := strconv.Atoi(p)
		if err != nil || g < 0 || g >= maxTokenGPUIndex || strconv.Itoa(g) != p || slices.Contains(gpus, g) {
			return "", 0, nil, bad
		}
		gpus = append(gpus, g)
	}
	return id, shards, gpus, nil
}

// FormatToken is the word the plugin appends to a comment it rewrote.
func FormatToken(id string, shards int) string {
	return tokenPrefix + id + ":" + strconv.Itoa(shards)
}

// FormatTokenOn is FormatToken for a decision of K shards on each of several
// GPUs, which it names: "coscheml-id=<id>:<K>:0.3".
func FormatTokenOn(id string, shards int, gpus []int) string {
	if len(gpus) < 2 {
		return FormatToken(id, shards)
	}
	b := []byte(FormatToken(id, shards))
	for i, g := range gpus {
		if i == 0 {
			b = append(b, ':')
		} else {
			b = append(b, '.')
		}
		b = strconv.AppendInt(b, int64(g), 10)
	}
	return string(b)
}

// WithToken returns comment with every old token removed and tok appended.
// The words are joined by single spaces (as strings.Join of strings.Fields), in
// one allocation: it runs in every rewrite on slurmctld's submit path.
func WithToken(comment, tok string) string {
	var b strings.Builder
	b.Grow(len(comment) + 1 + len(tok))
	for rest := comment; ; {
		var w string
		if w, rest = nextWord(rest); w == "" {
			break
		}
		if !strings.HasPrefix(w, tokenPrefix) {
			b.WriteString(w)
			b.WriteByte(' ')
		}
	}
	b.WriteString(tok)
	return b.String()
}

// nextWord returns the first word of s (as strings.Fields splits: around runs
// of unicode.IsSpace) and what follows it; "" when s has no more words. It
// allocates nothing.
func nextWord(s string) (word, rest string) {
	start := -1
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		space := unicode.IsSpace(r)
		switch {
		case start < 0 && !space:
			start = i
		case start >= 0 && space:
			return s[start:i], s[i:]
		}
		i += size
	}
	if start < 0 {
		return "", ""
	}
	return s[start:], ""
}

// containsFold says whether s contains sub in any letter case (Unicode
// folding, as strings.EqualFold). sub is lower-case ASCII starting with a
// letter that folds only to its upper case ('c' of "coscheml"), so a match can
// start only at that byte in either case: a long comment costs one byte test
// per byte, not a fold per byte (a 1 MiB comment cost 6 ms at every job_modify).
func containsFold(s, sub string) bool {
	n := len(sub)
	for i := 0; i+n <= len(s); i++ {
		if s[i]|0x20 == sub[0] && strings.EqualFold(s[i:i+n], sub) {
			return true
		}
	}
	return false
}
