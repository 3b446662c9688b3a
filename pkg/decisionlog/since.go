// SPDX-License-Identifier: Apache-2.0

package decisionlog

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/coscheml/coscheml/pkg/safeopen"
)

// Since returns the records logged at or after since, oldest first, from the
// rotated file and the current one (for `coscheml status`: the decisions whose jobs
// have not started yet). Unreadable lines are skipped, as Find does; a missing log
// is no records.
func Since(path string, since time.Time) ([]Record, error) {
	return readRotated(path, func(rec *Record) bool { return !rec.Time.Before(since) })
}

// readRotated reads the well-formed records that keep accepts from the rotated
// file path.1, then path, oldest first; a missing file is no records.
func readRotated(path string, keep func(*Record) bool) ([]Record, error) {
	var out []Record
	for _, p := range []string{path + ".1", path} {
		f, err := safeopen.Regular(p, safeopen.NoFollow)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("decision log: %w", err)
		}
		recs, err := readRecords(f, keep)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("decision log %s: %w", p, err)
		}
		out = append(out, recs...)
	}
	return out, nil
}

// readRecords parses JSON lines, keeping the well-formed records keep accepts.
// A line longer than maxLine is skipped with the rest of the file's lines intact.
func readRecords(r io.Reader, keep func(*Record) bool) ([]Record, error) {
	var out []Record
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br)
		if len(line) > 0 {
			var rec Record
			if json.Unmarshal(line, &rec) == nil && keep(&rec) {
				out = append(out, rec)
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// readLine returns the next line without its newline; nil for a line longer than
// maxLine, which is consumed and dropped.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLine+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			return nil, err
		}
		if n := len(line); n > 0 && line[n-1] == '\n' {
			line = line[:n-1]
		}
		return line, err
	}
}
