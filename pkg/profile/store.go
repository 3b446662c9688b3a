// SPDX-License-Identifier: Apache-2.0

package profile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/coscheml/coscheml/pkg/atomicfile"
	"github.com/coscheml/coscheml/pkg/safeopen"
)

// Ext is the file name extension of a stored profile: <dir>/<tag>.prof.
const Ext = ".prof"

// Store is a folder of profiles, one file per tag. Writers replace a file
// atomically (temp file, fsync, rename, fsync of the folder), so readers and other
// writers, in this process or another, only ever see a whole old or a whole new
// file; with concurrent writers of one tag the last rename wins.
type Store struct {
	dir string
}

// Open opens the store in dir, creating the folder (0755) if needed.
func Open(dir string) (*Store, error) {
	if dir == "" {
		return nil, errors.New("profile store: empty folder name")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("profile store %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("profile store %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("profile store %s: not a folder", dir)
	}
	return &Store{dir: filepath.Clean(dir)}, nil
}

// Dir returns the store's folder.
func (s *Store) Dir() string { return s.dir }

// Path returns the file that holds tag's profile. The tag must be valid: it is
// checked here so that no caller can build a path from an unchecked tag.
func (s *Store) Path(tag string) (string, error) {
	if err := ValidateTag(tag); err != nil {
		return "", err
	}
	return filepath.Join(s.dir, tag+Ext), nil
}

// Put validates p and atomically writes it as <dir>/<tag>.prof, replacing any
// previous profile of that tag.
func (s *Store) Put(p *Profile) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("profile store %s: %w", s.dir, err)
	}
	path, err := s.Path(p.Tag)
	if err != nil {
		return err
	}
	b, err := Encode(p)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := atomicfile.Write(path, b, 0o644); err != nil {
		return fmt.Errorf("write profile %s: %w", path, err)
	}
	return nil
}

// Get reads tag's profile. A missing profile is an error wrapping ErrNotFound; a
// damaged one wraps ErrFormat and names the file.
func (s *Store) Get(tag string) (*Profile, error) {
	path, err := s.Path(tag)
	if err != nil {
		return nil, err
	}
	p, err := readFile(path, tag)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tag %q (no file %s): %w", tag, path, ErrNotFound)
	}
	return p, err
}

// readFile reads and decodes one profile file and checks that it holds the
// profile of tag (its name), so a copied or renamed file is caught.
func readFile(path, tag string) (*Profile, error) {
	// The profile folder is written by profiling runs: regular files only, no
	// symlink, never blocking on a FIFO (slurmctld reads these).
	f, err := safeopen.Regular(path, safeopen.NoFollow)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	p, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if p.Tag != tag {
		return nil, fmt.Errorf("%s: %w: holds the profile of tag %q, not %q", path, ErrFormat, p.Tag, tag)
	}
	return p, nil
}

// ErrTooMany is wrapped by the problem a bounded load reports when the store
// holds more profiles than its bound.
var ErrTooMany = errors.New("more profiles than the store's bound")

// List reads every profile in the store, sorted by tag. A file that cannot be read
// or decoded is reported in problems, named by its path, and the others are still
// returned. Dot files (temp files of writers in progress) and files not ending in
// .prof are ignored.
func (s *Store) List() (profiles []*Profile, problems []error) { return s.ListMax(0) }

// ListMax is List reading at most limit profile files, the first by tag (limit <= 0:
// no bound). Beyond the bound nothing more is read, and one problem wrapping
// ErrTooMany says how many profiles were left out and from which tag on: a
// store grown past what the configuration allows must not slow or swell its
// readers (slurmctld's library among them), and the profiles within the bound
// keep working.
func (s *Store) ListMax(limit int) (profiles []*Profile, problems []error) {
	// Not os.ReadDir: slurmctld's reload lists this, and a plain open(2) of a FIFO
	// there would wait forever.
	d, err := safeopen.Dir(s.dir)
	if err != nil {
		return nil, []error{fmt.Errorf("profile store %s: %w", s.dir, err)}
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return nil, []error{fmt.Errorf("profile store %s: %w", s.dir, err)}
	}
	entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool {
		return strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), Ext)
	})
	slices.SortFunc(entries, func(a, b os.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	if limit > 0 && len(entries) > limit {
		problems = append(problems, fmt.Errorf("profile store %s: %d profile files, more than max_profiles (%d): the %d from %q on are not loaded: %w",
			s.dir, len(entries), limit, len(entries)-limit, Sanitize(entries[limit].Name()), ErrTooMany))
		entries = entries[:limit]
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(s.dir, name)
		tag := strings.TrimSuffix(name, Ext)
		if err := ValidateTag(tag); err != nil {
			problems = append(problems, fmt.Errorf("%s: file name is not a valid tag: %w", filepath.Join(s.dir, Sanitize(name)), err))
			continue
		}
		if !e.Type().IsRegular() {
			problems = append(problems, fmt.Errorf("%s: not a regular file", path))
			continue
		}
		p, err := readFile(path, tag)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since ReadDir
			}
			problems = append(problems, err)
			continue
		}
		profiles = append(profiles, p)
	}
	sort.Slice(profiles, func(i, j int) bool { return profiles[i].Tag < profiles[j].Tag })
	return profiles, problems
}

// Catalog loads the whole store into an immutable Catalog; problems are as in List.
func (s *Store) Catalog() (Catalog, []error) { return s.CatalogMax(0) }

// CatalogMax loads at most limit profiles (see ListMax) into an immutable Catalog.
func (s *Store) CatalogMax(limit int) (Catalog, []error) {
	ps, problems := s.ListMax(limit)
	return CatalogOf(ps), problems
}

// Count is the number of profile files in the store (dot files and other names
// not counted), without reading them.
func (s *Store) Count() (int, error) {
	d, err := safeopen.Dir(s.dir)
	if err != nil {
		return 0, fmt.Errorf("profile store %s: %w", s.dir, err)
	}
	defer d.Close()
	n := 0
	for {
		batch, err := d.ReadDir(1024)
		for _, e := range batch {
			if name := e.Name(); !strings.HasPrefix(name, ".") && strings.HasSuffix(name, Ext) {
				n++
			}
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("profile store %s: %w", s.dir, err)
		}
	}
}

// Remove deletes tag's profile; a missing profile is an error wrapping ErrNotFound.
func (s *Store) Remove(tag string) error {
	path, err := s.Path(tag)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("tag %q (no file %s): %w", tag, path, ErrNotFound)
		}
		return fmt.Errorf("remove profile: %w", err)
	}
	return atomicfile.SyncDir(s.dir)
}
