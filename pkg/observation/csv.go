// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/coscheml/coscheml/pkg/profile"
	"github.com/coscheml/coscheml/pkg/profile/csvtab"
)

// Formats are documented in docs/observations.md.

// Header is the header line of the generic observation CSV, in the order WriteCSV
// writes it.
var header = []string{"tag", "class", "co_tags", "speed", "source", "job_id", "node", "when", "uid"}

// headerV1 is the header before the uid column: files in it are still read, and
// AppendFile keeps appending to them in that layout (without the uid).
var headerV1 = header[:8]

// Header returns the columns of the generic observation CSV.
func Header() []string { return append([]string(nil), header...) }

// MaxSpeed is the largest speed accepted. Measured speeds slightly above 1 are
// noise; anything above 2 is a broken measurement, not a job that sped up.
const MaxSpeed = 2.0

// MaxCoTags bounds the co-runners of one observation.
const MaxCoTags = 16

// LucidPairsSource is the Source of observations from ReadLucidPairs.
const LucidPairsSource = "lucid-train colocate_pairs.csv"

// Validate checks an observation: valid tag, class (may be empty) and co-runner
// tags, a speed that is finite and in (0, MaxSpeed], printable-ASCII free text
// (Source, JobID, Node) without leading or trailing spaces, a time that RFC 3339
// can represent, and a UID that is empty or a uid (decimal, below 2^32-1).
func (o Observation) Validate() error {
	if err := profile.ValidateTag(o.Tag); err != nil {
		return err
	}
	if o.Class != "" {
		if _, err := profile.ParseClass(string(o.Class)); err != nil {
			return fmt.Errorf("tag %s: %w", o.Tag, err)
		}
	}
	if len(o.CoTags) > MaxCoTags {
		return fmt.Errorf("tag %s: %d co-runners, more than %d", o.Tag, len(o.CoTags), MaxCoTags)
	}
	for _, c := range o.CoTags {
		if err := profile.ValidateTag(c); err != nil {
			return fmt.Errorf("tag %s: co-runner: %w", o.Tag, err)
		}
	}
	if math.IsNaN(o.Speed) || o.Speed <= 0 || o.Speed > MaxSpeed {
		return fmt.Errorf("tag %s: speed %v: want a number in (0, %v]", o.Tag, o.Speed, MaxSpeed)
	}
	for _, f := range []struct{ n, v string }{{"source", o.Source}, {"job_id", o.JobID}, {"node", o.Node}} {
		if err := profile.CheckText(f.v); err != nil {
			return fmt.Errorf("tag %s: %s: %w", o.Tag, f.n, err)
		}
		// The CSV reader trims cells; a padded value would not read back equal.
		if strings.TrimSpace(f.v) != f.v {
			return fmt.Errorf("tag %s: %s %q: leading or trailing space", o.Tag, f.n, f.v)
		}
	}
	if err := ValidateUID(o.UID); err != nil {
		return fmt.Errorf("tag %s: %w", o.Tag, err)
	}
	if !o.When.IsZero() {
		// RFC 3339 has four-digit years and minute-precision zone offsets.
		if y := o.When.Year(); y < 1 || y > 9999 {
			return fmt.Errorf("tag %s: when: year %d outside 1..9999", o.Tag, y)
		}
		if _, off := o.When.Zone(); off%60 != 0 {
			return fmt.Errorf("tag %s: when: zone offset %ds is not whole minutes", o.Tag, off)
		}
	}
	return nil
}

// ValidateUID accepts "" (unknown) or a uid as Slurm gives it in SLURM_JOB_UID:
// decimal digits without a sign or leading zero, below 4294967295 (NO_VAL).
func ValidateUID(uid string) error {
	if uid == "" {
		return nil
	}
	n, err := strconv.ParseUint(uid, 10, 32)
	if err != nil || n == math.MaxUint32 || (len(uid) > 1 && uid[0] == '0') {
		return fmt.Errorf("uid %q: want decimal digits of a uid", profile.Sanitize(uid))
	}
	return nil
}

// ReadLucidPairs reads the pair file of the Lucid artifact
// (models/data/lucid-train/colocate_pairs.csv). Each row is one pair of setups
// sharing one GPU and yields two observations, one per direction: job 1 (tag of
// model1/batchsize1/amp1) with co-runner job 2 at speed1, and job 2 with co-runner
// job 1 at speed2. Tags follow profile.LucidTag; class is train.
//
// A row whose gpu_num1 or gpu_num2 is not 1 is rejected with an error: such a job
// spans GPUs, and its speed does not measure the sharing of one GPU that the model
// predicts. (The shipped file has none.) Speeds must be in (0, MaxSpeed].
func ReadLucidPairs(r io.Reader) ([]Observation, error) {
	req := []string{"model1", "batchsize1", "amp1", "speed1", "model2", "batchsize2", "amp2", "speed2"}
	t, err := csvtab.New(r, csvtab.Options{Required: req})
	if err != nil {
		return nil, fmt.Errorf("lucid pairs csv: %w", err)
	}
	var out []Observation
	for {
		if err := t.Next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("lucid pairs csv: %w", err)
		}
		o1, o2, err := lucidPair(t)
		if err != nil {
			return nil, fmt.Errorf("lucid pairs csv: %w", err)
		}
		out = append(out, o1, o2)
	}
	if len(out) == 0 {
		return nil, errors.New("lucid pairs csv: no data rows")
	}
	return out, nil
}

func lucidPair(t *csvtab.Table) (o1, o2 Observation, err error) {
	var tags [2]string
	var speeds [2]float64
	for i, sfx := range []string{"1", "2"} {
		if t.Column("gpu_num" + sfx) {
			n, err := t.Int("gpu_num"+sfx, 1, math.MaxInt32)
			if err != nil {
				return o1, o2, err
			}
			if n != 1 {
				return o1, o2, t.Errf("gpu_num"+sfx, "%d GPUs: only single-GPU pairs are supported", n)
			}
		}
		if tags[i], err = profile.LucidRowTag(t, "model"+sfx, "batchsize"+sfx, "amp"+sfx); err != nil {
			return o1, o2, err
		}
		if speeds[i], err = t.Float("speed"+sfx, 0, MaxSpeed); err != nil {
			return o1, o2, err
		}
		if speeds[i] == 0 {
			return o1, o2, t.Errf("speed"+sfx, "must be positive")
		}
	}
	src := fmt.Sprintf("%s line %d", LucidPairsSource, t.Line())
	o1 = Observation{Tag: tags[0], Class: profile.ClassTrain, CoTags: []string{tags[1]}, Speed: speeds[0], Source: src}
	o2 = Observation{Tag: tags[1], Class: profile.ClassTrain, CoTags: []string{tags[0]}, Speed: speeds[1], Source: src}
	return o1, o2, nil
}

// ReadCSV reads the generic observation CSV (docs/observations.md). The header
// must name the columns tag, co_tags and speed; class, source, job_id, node,
// when and uid are optional, other columns are an error; order is free. co_tags joins the
// co-runners' tags with '+' (empty: the job ran alone), when is RFC 3339 (empty:
// unknown). Lines starting with '#' are comments. Every row is validated, and
// errors name the line and the column.
func ReadCSV(r io.Reader) ([]Observation, error) {
	known := map[string]bool{}
	for _, h := range header {
		known[h] = true
	}
	t, err := csvtab.New(r, csvtab.Options{Required: []string{"tag", "co_tags", "speed"}, Known: known, Comments: true})
	if err != nil {
		return nil, err
	}
	var out []Observation
	for {
		if err := t.Next(); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		o, err := csvRow(t)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

func csvRow(t *csvtab.Table) (Observation, error) {
	var o Observation
	o.Tag = t.Str("tag")
	if err := profile.ValidateTag(o.Tag); err != nil {
		return o, t.Errf("tag", "%v", err)
	}
	if t.Has("class") {
		c, err := profile.ParseClass(t.Str("class"))
		if err != nil {
			return o, t.Errf("class", "%v", err)
		}
		o.Class = c
	}
	if co := t.Str("co_tags"); co != "" {
		o.CoTags = strings.Split(co, "+")
		if len(o.CoTags) > MaxCoTags {
			return o, t.Errf("co_tags", "%d co-runners, more than %d", len(o.CoTags), MaxCoTags)
		}
		for i, c := range o.CoTags {
			if err := profile.ValidateTag(c); err != nil {
				return o, t.Errf("co_tags", "co-runner %d: %v", i+1, err)
			}
		}
	}
	var err error
	if o.Speed, err = t.Float("speed", 0, MaxSpeed); err != nil {
		return o, err
	}
	if o.Speed == 0 {
		return o, t.Errf("speed", "must be positive")
	}
	for _, f := range []struct {
		n string
		d *string
	}{{"source", &o.Source}, {"job_id", &o.JobID}, {"node", &o.Node}} {
		v := t.Str(f.n)
		if err := profile.CheckText(v); err != nil {
			return o, t.Errf(f.n, "%v", err)
		}
		*f.d = v
	}
	if t.Has("when") {
		v := t.Str("when")
		w, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return o, t.Errf("when", "%q is not an RFC 3339 time", profile.Sanitize(v))
		}
		o.When = w
	}
	if t.Has("uid") {
		v := t.Str("uid")
		if err := ValidateUID(v); err != nil {
			return o, t.Errf("uid", "%v", err)
		}
		o.UID = v
	}
	// The per-column checks above cover all of Validate except the time's range
	// (time.Parse accepts year 0): check the whole, as every reader promises.
	if err := o.Validate(); err != nil {
		return o, t.Errf("when", "%v", err)
	}
	return o, nil
}

// WriteCSV writes the header and one row per observation. Every observation is
// validated first; nothing is written if one is invalid.
func WriteCSV(w io.Writer, obs []Observation) error {
	if err := validateAll(obs); err != nil {
		return err
	}
	return writeRows(w, obs, true)
}

func validateAll(obs []Observation) error {
	for i, o := range obs {
		if err := o.Validate(); err != nil {
			return fmt.Errorf("observation %d: %w", i+1, err)
		}
	}
	return nil
}

// writeRows writes validated observations, with the header first if withHeader.
// Speeds use the shortest form that parses back to the same float64; times are
// RFC 3339 with nanoseconds (empty for the zero time).
func writeRows(w io.Writer, obs []Observation, withHeader bool) error {
	return writeRowsCols(w, obs, withHeader, len(header))
}

// writeRowsCols writes the first ncols columns of the header and of every row
// (len(headerV1) for a file in the layout before the uid column).
func writeRowsCols(w io.Writer, obs []Observation, withHeader bool, ncols int) error {
	cw := csv.NewWriter(w)
	if withHeader {
		if err := cw.Write(header[:ncols]); err != nil {
			return err
		}
	}
	rec := make([]string, len(header))
	for _, o := range obs {
		rec[0] = o.Tag
		rec[1] = string(o.Class)
		rec[2] = strings.Join(o.CoTags, "+")
		rec[3] = strconv.FormatFloat(o.Speed, 'g', -1, 64)
		rec[4] = o.Source
		rec[5] = o.JobID
		rec[6] = o.Node
		rec[7] = ""
		if !o.When.IsZero() {
			rec[7] = o.When.Format(time.RFC3339Nano)
		}
		rec[8] = o.UID
		if err := cw.Write(rec[:ncols]); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
