// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/coscheml/coscheml/pkg/safeopen"
)

// Sane bounds of a measured co-located speed (docs/observations.md). The shipped
// Lucid pairs lie in [0.444, 1.329]. Above 1.5 a job did different (less) work
// than its solo reference, not the same work faster because it shared a GPU.
// At or below 0.05 a job ran more than 20 times slower than alone: more than
// time-slicing among MaxCoTags+1 jobs (1/17 ≈ 0.059) explains, so the reference
// or the run is broken (a 5 s solo reference against a 1 h co-run gives 0.0014).
const (
	MinSaneSpeed = 0.05 // exclusive
	MaxSaneSpeed = 1.5  // inclusive
)

// Sane reports whether an observation's speed lies within the sane bounds
// (MinSaneSpeed, MaxSaneSpeed]; Validate's wider (0, MaxSpeed] is the file format.
func Sane(o Observation) error {
	if !(o.Speed > MinSaneSpeed && o.Speed <= MaxSaneSpeed) {
		return fmt.Errorf("tag %s: speed %v outside the sane bounds (%v, %v]", o.Tag, o.Speed, MinSaneSpeed, MaxSaneSpeed)
	}
	return nil
}

// BadRowsError reports the rows of one file that were skipped.
type BadRowsError struct {
	Path  string
	Count int     // rows skipped
	First []error // the first few, with their line numbers
}

// maxBadRowsNamed bounds the row errors a BadRowsError keeps.
const maxBadRowsNamed = 3

func (e *BadRowsError) Error() string {
	msgs := make([]string, len(e.First))
	for i, err := range e.First {
		msgs[i] = err.Error()
	}
	more := ""
	if e.Count > len(e.First) {
		more = fmt.Sprintf("; %d more", e.Count-len(e.First))
	}
	return fmt.Sprintf("%s: %d bad rows skipped (%s%s)", e.Path, e.Count, strings.Join(msgs, "; "), more)
}

// maxLineBytes bounds one row; an observation row is far shorter (free text is at
// most 256 bytes per field).
const maxLineBytes = 1 << 16

// ReadFileRows reads one generic observation CSV row by row (see ReadDir): it
// returns the good, sane rows and, when rows were skipped, a *BadRowsError; a file
// that cannot be opened or has no observation header gives no rows and an error.
// Every row is parsed on its own (an observation row never spans lines), so one
// torn row, even with an unbalanced quote, cannot take the rows after it along.
func ReadFileRows(path string) ([]Observation, error) {
	f, err := safeopen.Regular(path, safeopen.FollowLinks) // a FIFO must not block slurmctld's reload
	if err != nil {
		return nil, fmt.Errorf("read observations: %w", err)
	}
	defer f.Close()
	obs, bad, err := readRows(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if bad.Count > 0 {
		bad.Path = path
		return obs, bad
	}
	return obs, nil
}

// readRows is ReadFileRows on a reader.
func readRows(r io.Reader) ([]Observation, *BadRowsError, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	bad := &BadRowsError{}
	skip := func(line int, err error) {
		bad.Count++
		if len(bad.First) < maxBadRowsNamed {
			bad.First = append(bad.First, fmt.Errorf("line %d: %w", line, err))
		}
	}
	var hdr string
	var obs []Observation
	for line := 1; ; line++ {
		text, tooLong, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return obs, bad, err
		}
		if tooLong {
			skip(line, fmt.Errorf("longer than %d bytes", maxLineBytes))
			continue
		}
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if hdr == "" {
			if _, err := ReadCSV(strings.NewReader(text + "\n")); err != nil {
				return nil, bad, fmt.Errorf("line %d: not an observation header: %w", line, err)
			}
			hdr = text
			continue
		}
		row, err := ReadCSV(strings.NewReader(hdr + "\n" + text + "\n"))
		switch {
		case err != nil:
			skip(line, errors.New(rowErr(err.Error())))
		case len(row) != 1:
			skip(line, errors.New("not one row"))
		default:
			if err := Sane(row[0]); err != nil {
				skip(line, err)
				continue
			}
			obs = append(obs, row[0])
		}
	}
	if hdr == "" {
		return nil, bad, errors.New("empty input: no header line")
	}
	return obs, bad, nil
}

// rowErr drops the "line 2" that parsing one row after the header puts first.
func rowErr(msg string) string {
	msg = strings.TrimPrefix(msg, "line 2")
	msg = strings.TrimPrefix(msg, ",")
	msg = strings.TrimPrefix(msg, ":")
	return strings.TrimSpace(msg)
}

// readLine returns the next line without its end; a line longer than
// maxLineBytes is consumed and reported as tooLong.
func readLine(br *bufio.Reader) (text string, tooLong bool, err error) {
	var b []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		if err != nil {
			if err == io.EOF && (len(b) > 0 || tooLong) {
				return string(b), tooLong, nil
			}
			return "", false, err
		}
		if !tooLong {
			b = append(b, chunk...)
			if len(b) > maxLineBytes {
				tooLong, b = true, nil
			}
		}
		if !isPrefix {
			return string(b), tooLong, nil
		}
	}
}
