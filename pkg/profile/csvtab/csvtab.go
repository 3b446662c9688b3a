// SPDX-License-Identifier: Apache-2.0

// Package csvtab reads header-driven CSV files: the header names the columns, rows
// are read by column name, and every error names the line and the column. It
// serves the importers of pkg/profile and pkg/observation.
package csvtab

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/coscheml/coscheml/pkg/safetext"
)

// Options controls which header is accepted.
type Options struct {
	Required []string        // columns that must be present
	Known    map[string]bool // every accepted column; nil accepts any
	Comments bool            // lines starting with '#' are comments
}

// Table is a CSV reader positioned on a data row.
type Table struct {
	r    *csv.Reader
	col  map[string]int
	rec  []string
	line int
}

// New reads the header. A UTF-8 byte-order mark and surrounding spaces are
// ignored, names are compared in lower case, and empty, duplicate or (with Known)
// unknown columns are errors.
func New(r io.Reader, o Options) (*Table, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	if o.Comments {
		cr.Comment = '#'
	}
	hdr, err := cr.Read()
	if err == io.EOF {
		return nil, errors.New("empty input: no header line")
	}
	if err != nil {
		return nil, parseErr(err)
	}
	line, _ := cr.FieldPos(0)
	t := &Table{r: cr, col: make(map[string]int, len(hdr)), line: line}
	for i, h := range hdr {
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff")
		}
		h = strings.ToLower(strings.TrimSpace(h))
		switch {
		case h == "":
			return nil, fmt.Errorf("line %d: header column %d is empty", line, i+1)
		case o.Known != nil && !o.Known[h]:
			return nil, fmt.Errorf("line %d: unknown column %q", line, sanitize(h))
		}
		if _, dup := t.col[h]; dup {
			return nil, fmt.Errorf("line %d: column %q appears twice", line, sanitize(h))
		}
		t.col[h] = i
	}
	for _, c := range o.Required {
		if _, ok := t.col[c]; !ok {
			return nil, fmt.Errorf("line %d: missing required column %q", line, c)
		}
	}
	return t, nil
}

func parseErr(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("line %d: %v", pe.Line, pe.Err)
	}
	return err
}

// Next moves to the next data row; it returns io.EOF after the last one.
func (t *Table) Next() error {
	rec, err := t.r.Read()
	if err != nil {
		if err == io.EOF {
			return err
		}
		return parseErr(err)
	}
	t.rec = rec
	t.line, _ = t.r.FieldPos(0)
	return nil
}

// Line is the line number of the current row (of the header before Next).
func (t *Table) Line() int { return t.line }

// Has reports whether the column exists and is non-empty in the current row.
func (t *Table) Has(name string) bool {
	i, ok := t.col[name]
	return ok && strings.TrimSpace(t.rec[i]) != ""
}

// Column reports whether the header has the column.
func (t *Table) Column(name string) bool {
	_, ok := t.col[name]
	return ok
}

// Str returns the trimmed cell ("" when the column is absent).
func (t *Table) Str(name string) string {
	if i, ok := t.col[name]; ok {
		return strings.TrimSpace(t.rec[i])
	}
	return ""
}

// Errf returns an error naming the current line and the column.
func (t *Table) Errf(name, format string, args ...any) error {
	return fmt.Errorf("line %d, column %s: %s", t.line, name, fmt.Sprintf(format, args...))
}

// Float parses a finite number in [lo, hi].
func (t *Table) Float(name string, lo, hi float64) (float64, error) {
	s := t.Str(name)
	if s == "" {
		return 0, t.Errf(name, "empty")
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, t.Errf(name, "%q is not a finite number", sanitize(s))
	}
	if v < lo || v > hi {
		return 0, t.Errf(name, "%v is outside %v..%v", v, lo, hi)
	}
	return v, nil
}

// Int parses an integer in [lo, hi].
func (t *Table) Int(name string, lo, hi int) (int, error) {
	s := t.Str(name)
	v, err := strconv.Atoi(s)
	if err != nil {
		return 0, t.Errf(name, "%q is not an integer", sanitize(s))
	}
	if v < lo || v > hi {
		return 0, t.Errf(name, "%d is outside %d..%d", v, lo, hi)
	}
	return v, nil
}

func sanitize(s string) string { return safetext.Sanitize(s) }
