// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// The sample file is how the detached sampler hands its readings to the Epilog.
// It is appended line by line, so a sampler killed at any moment leaves a file
// whose complete lines are all valid:
//
//	# coscheml samples v1
//	#gpu 0 NVIDIA H200 141GB HBM3e
//	unix_ns,gpu,utilization.gpu,utilization.memory,memory.used,pcie.tx,pcie.rx,power.draw,clocks.sm,procs,proc_sm_util
//	1700000000000000000,0,35,22,8192,2,4,150,1980,1,35
//	#note partial gpu 0: power.draw not supported
//
// An empty value means "not read"; procs is empty when per-process utilization
// is not offered. Rows of one sampling instant share unix_ns and are adjacent.
const (
	sampleMagic  = "# coscheml samples v1"
	sampleHeader = "unix_ns,gpu,utilization.gpu,utilization.memory,memory.used,pcie.tx,pcie.rx,power.draw,clocks.sm,procs,proc_sm_util"
	sampleCols   = 11
	maxLineLen   = 4096
)

// Writer is a Sink that appends the sample file format to w. Call Flush (or use an
// unbuffered file) so that a killed sampler loses at most one round.
type Writer struct {
	w     *bufio.Writer
	wrote bool
	buf   []byte
}

// NewWriter returns a Writer; the header is written with the first record.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w)} }

func (w *Writer) header() {
	if !w.wrote {
		w.wrote = true
		w.w.WriteString(sampleMagic + "\n" + sampleHeader + "\n")
	}
}

// Device records a GPU's model name.
func (w *Writer) Device(gpu int, name string) error {
	w.header()
	fmt.Fprintf(w.w, "#gpu %d %s\n", gpu, oneLine(name))
	return w.w.Flush()
}

// Round appends one row per sample.
func (w *Writer) Round(at time.Time, samples []Sample) error {
	w.header()
	for i := range samples {
		s := &samples[i]
		b := w.buf[:0]
		b = strconv.AppendInt(b, at.UnixNano(), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(s.GPU), 10)
		for m := Metric(0); m < NumMetrics; m++ {
			b = append(b, ',')
			if s.Has(m) {
				b = strconv.AppendFloat(b, s.Values[m], 'g', -1, 64)
			}
		}
		b = append(b, ',')
		if s.Procs >= 0 {
			b = strconv.AppendInt(b, int64(s.Procs), 10)
			b = append(b, ',')
			b = strconv.AppendFloat(b, s.ProcSMUtil, 'g', -1, 64)
		} else {
			b = append(b, ',')
		}
		b = append(b, '\n')
		w.buf = b
		if _, err := w.w.Write(b); err != nil {
			return fmt.Errorf("writing samples: %w", err)
		}
	}
	return w.w.Flush()
}

// Note appends a note line.
func (w *Writer) Note(text string, partial bool) error {
	w.header()
	kind := "info"
	if partial {
		kind = "partial"
	}
	fmt.Fprintf(w.w, "#note %s %s\n", kind, oneLine(text))
	return w.w.Flush()
}

// maxNoteLen bounds one note or name.
const maxNoteLen = 200

// oneLine keeps a note or name on one line of printable ASCII (others become '?'),
// at most maxNoteLen bytes, so it can go into a profile, a log or a terminal.
func oneLine(s string) string {
	if len(s) > maxNoteLen {
		s = s[:maxNoteLen-3] + "..."
	}
	b := []byte(s)
	for i, c := range b {
		if c < 0x20 || c > 0x7e {
			b[i] = '?'
		}
	}
	return string(b)
}

// ErrNotSampleFile: the input does not start with the sample file's magic line.
var ErrNotSampleFile = errors.New("not a coscheml sample file")

// ReadSamples parses a sample file into sink. A last line without its newline (the
// sampler was killed mid-write) is ignored; other malformed lines are skipped
// and counted in one note, so that one bad line cannot cost a whole profile.
func ReadSamples(r io.Reader, sink Sink) error {
	br := bufio.NewReaderSize(r, maxLineLen)
	var (
		lineNo, bad int
		firstBad    string
		round       []Sample
		roundAt     int64
		sawMagic    bool
	)
	flush := func() error {
		if len(round) == 0 {
			return nil
		}
		err := sink.Round(time.Unix(0, roundAt), round)
		round = round[:0:0]
		return err
	}
	for {
		line, err := readLine(br)
		if err == io.EOF {
			break
		}
		lineNo++
		if errors.Is(err, errLongLine) {
			bad++
			if firstBad == "" {
				firstBad = fmt.Sprintf("line %d: longer than %d bytes", lineNo, maxLineLen)
			}
			continue
		}
		if err != nil {
			if err == io.ErrUnexpectedEOF { // truncated last line
				break
			}
			return fmt.Errorf("reading samples: %w", err)
		}
		if !sawMagic {
			if line != sampleMagic {
				return fmt.Errorf("line 1: %w", ErrNotSampleFile)
			}
			sawMagic = true
			continue
		}
		switch {
		case line == "" || line == sampleHeader:
			continue
		case strings.HasPrefix(line, "#gpu "):
			f := strings.SplitN(line[len("#gpu "):], " ", 2)
			gpu, perr := strconv.Atoi(f[0])
			if perr != nil || len(f) != 2 || gpu < 0 {
				bad++
				if firstBad == "" {
					firstBad = fmt.Sprintf("line %d: bad #gpu line", lineNo)
				}
				continue
			}
			if err := sink.Device(gpu, oneLine(f[1])); err != nil {
				return err
			}
			continue
		case strings.HasPrefix(line, "#note "):
			rest := line[len("#note "):]
			kind, text, _ := strings.Cut(rest, " ")
			if err := sink.Note(oneLine(text), kind == "partial"); err != nil {
				return err
			}
			continue
		case strings.HasPrefix(line, "#"):
			continue
		}
		at, s, perr := parseRow(line)
		if perr != nil {
			bad++
			if firstBad == "" {
				firstBad = fmt.Sprintf("line %d: %v", lineNo, perr)
			}
			continue
		}
		if len(round) > 0 && at != roundAt {
			if err := flush(); err != nil {
				return err
			}
		}
		roundAt = at
		s.At = time.Unix(0, at)
		round = append(round, s)
	}
	if !sawMagic {
		return fmt.Errorf("empty input: %w", ErrNotSampleFile)
	}
	if err := flush(); err != nil {
		return err
	}
	if bad > 0 {
		return sink.Note(fmt.Sprintf("%d malformed sample lines skipped (first: %s)", bad, oneLine(firstBad)), false)
	}
	return nil
}

var errLongLine = errors.New("line too long")

// readLine returns the next line without its newline: io.ErrUnexpectedEOF for a
// final line with no newline, errLongLine (after skipping it) for an overlong one.
func readLine(br *bufio.Reader) (string, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		for err == bufio.ErrBufferFull {
			_, err = br.ReadSlice('\n')
		}
		if err != nil && err != io.EOF {
			return "", err
		}
		return "", errLongLine
	}
	if err == io.EOF {
		if len(line) == 0 {
			return "", io.EOF
		}
		return "", io.ErrUnexpectedEOF
	}
	if err != nil {
		return "", err
	}
	return string(bytes.TrimSuffix(line[:len(line)-1], []byte{'\r'})), nil
}

func parseRow(line string) (int64, Sample, error) {
	var s Sample
	f := strings.Split(line, ",")
	if len(f) != sampleCols {
		return 0, s, fmt.Errorf("%d fields, want %d", len(f), sampleCols)
	}
	at, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || at <= 0 {
		return 0, s, fmt.Errorf("bad time %q", oneLine(f[0]))
	}
	gpu, err := strconv.Atoi(f[1])
	if err != nil || gpu < 0 || gpu > 1<<16 {
		return 0, s, fmt.Errorf("bad gpu %q", oneLine(f[1]))
	}
	s.GPU = gpu
	for m := Metric(0); m < NumMetrics; m++ {
		v := f[2+int(m)]
		if v == "" {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return 0, s, fmt.Errorf("bad %s value %q", m, oneLine(v))
		}
		s.Set(m, x)
	}
	s.Procs = -1
	if f[9] != "" {
		n, err := strconv.Atoi(f[9])
		if err != nil || n < 0 {
			return 0, s, fmt.Errorf("bad procs %q", oneLine(f[9]))
		}
		x, err := strconv.ParseFloat(f[10], 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return 0, s, fmt.Errorf("bad proc_sm_util %q", oneLine(f[10]))
		}
		s.Procs, s.ProcSMUtil = n, x
	}
	return at, s, nil
}
