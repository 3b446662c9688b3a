// SPDX-License-Identifier: Apache-2.0

package observation

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/coscheml/coscheml/pkg/safeopen"
)

// AppendFile appends observations to the generic CSV file at path, creating it
// (0644, with the header) if it does not exist. It runs as root in the Epilog, so
// it never follows a symlink at path (O_NOFOLLOW) and appends only to a regular
// file. It is safe for concurrent
// appenders on one node, e.g. the epilogs of jobs ending together: the file is
// opened O_APPEND and held under an exclusive flock while the header check and
// the write happen, so the header is written once and rows never interleave.
// An existing file must start with the header; if its last line was cut off (a
// writer crashed mid-line), a newline is added first so that only that line is
// bad. All observations are validated before anything is written.
func AppendFile(path string, obs ...Observation) (err error) {
	if err := validateAll(obs); err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	f, err := openAppend(path)
	if err != nil {
		return fmt.Errorf("append observations: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("append %s: %w", path, cerr)
		}
	}()
	if err := lockFile(f); err != nil {
		return fmt.Errorf("append %s: lock: %w", path, err)
	}
	defer unlockFile(f)
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("append %s: not a regular file", path)
	}
	var buf bytes.Buffer
	if fi.Size() == 0 {
		if err := writeRows(&buf, obs, true); err != nil {
			return fmt.Errorf("append %s: %w", path, err)
		}
	} else {
		ncols, nl, err := checkExisting(f, fi.Size())
		if err != nil {
			return fmt.Errorf("append %s: %w", path, err)
		}
		if nl {
			buf.WriteByte('\n')
		}
		if err := writeRowsCols(&buf, obs, false, ncols); err != nil {
			return fmt.Errorf("append %s: %w", path, err)
		}
	}
	// One write of whole lines: with O_APPEND it lands at the end even if a
	// writer that ignores the lock appends too.
	if _, err := f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("append %s: %w", path, err)
	}
	return nil
}

// checkExisting verifies that the file starts with a header line, returns its
// number of columns, and reports whether its last byte is not a newline.
func checkExisting(f *os.File, size int64) (ncols int, needNewline bool, err error) {
	if ncols, err = checkHeaderLine(f); err != nil {
		return 0, false, err
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return 0, false, err
	}
	return ncols, last[0] != '\n', nil
}

// checkHeaderLine accepts any header that ReadCSV accepts with exactly the columns
// of Header, or of the layout before the uid column (rows are appended in that
// order, so the order must match too), and returns its number of columns.
func checkHeaderLine(f *os.File) (int, error) {
	line, err := bufio.NewReader(io.NewSectionReader(f, 0, 1<<16)).ReadString('\n')
	if err != nil && err != io.EOF {
		return 0, err
	}
	cols := strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "\ufeff")), ",")
	for i := range cols {
		cols[i] = strings.ToLower(strings.TrimSpace(cols[i]))
	}
	switch strings.Join(cols, ",") {
	case strings.Join(header, ","):
		return len(header), nil
	case strings.Join(headerV1, ","):
		return len(headerV1), nil
	}
	return 0, fmt.Errorf("not an observation file: first line is not the header %q", strings.Join(header, ","))
}

// ReadFile reads one generic observation CSV file; errors name the file.
func ReadFile(path string) ([]Observation, error) {
	f, err := safeopen.Regular(path, safeopen.FollowLinks)
	if err != nil {
		return nil, fmt.Errorf("read observations: %w", err)
	}
	defer f.Close()
	obs, err := ReadCSV(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return obs, nil
}

// ReadDir reads every *.csv file in dir (not recursing; dot files ignored), in
// name order, row by row: a bad row (torn by a crashed writer, edited by hand,
// or with a speed outside the sane bounds of Sane) is skipped and counted, and the
// file's other rows still count. Problems name the file; a file with bad rows
// gives one problem (*BadRowsError) that counts them and names the first few. A
// file that cannot be opened, or whose header is not an observation header,
// contributes nothing and is one problem. A missing dir is one problem wrapping
// fs.ErrNotExist.
func ReadDir(dir string) (obs []Observation, problems []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, []error{fmt.Errorf("observation folder: %w", err)}
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") || !strings.HasSuffix(n, ".csv") || e.IsDir() {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		o, err := ReadFileRows(filepath.Join(dir, n))
		if err != nil {
			problems = append(problems, err)
		}
		obs = append(obs, o...)
	}
	return obs, problems
}
