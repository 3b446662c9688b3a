// SPDX-License-Identifier: Apache-2.0

package safeopen

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coscheml/coscheml/internal/nohang"
)

func openWithin(t *testing.T, fn func() error) error {
	t.Helper()
	return nohang.Call(t, "open", fn)
}

func TestRegular(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	if err := os.WriteFile(reg, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(reg, link); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifolink")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path string
		follow     Follow
		want       string // file content, or "" for an error
		errHas     string
		notExist   bool
	}{
		{name: "regular", path: reg, follow: NoFollow, want: "hello"},
		{name: "regular follow", path: reg, follow: FollowLinks, want: "hello"},
		{name: "symlink followed", path: link, follow: FollowLinks, want: "hello"},
		{name: "symlink refused", path: link, follow: NoFollow, errHas: "symlink"},
		{name: "fifo", path: fifo, follow: NoFollow, errHas: "FIFO"},
		{name: "fifo follow", path: fifo, follow: FollowLinks, errHas: "FIFO"},
		{name: "symlink to fifo", path: fifoLink, follow: FollowLinks, errHas: "FIFO"},
		{name: "folder", path: dir, follow: NoFollow, errHas: "folder"},
		{name: "missing", path: filepath.Join(dir, "none"), follow: NoFollow, notExist: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			err := openWithin(t, func() error {
				f, err := Regular(tc.path, tc.follow)
				if err != nil {
					return err
				}
				defer f.Close()
				b, err := io.ReadAll(f)
				got = string(b)
				return err
			})
			switch {
			case tc.notExist:
				if !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("err %v, want not exist", err)
				}
			case tc.want != "":
				if err != nil || got != tc.want {
					t.Fatalf("got %q, %v; want %q", got, err, tc.want)
				}
			default:
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("err %v, want ErrNotRegular naming %s and %q", err, tc.path, tc.errHas)
				}
			}
		})
	}
}

func TestDir(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, nil, 0o644)
	link := filepath.Join(dir, "link")
	os.Symlink(dir, link)
	for _, tc := range []struct {
		path string
		ok   bool
	}{{dir, true}, {link, true}, {fifo, false}, {reg, false}} {
		err := openWithin(t, func() error {
			f, err := Dir(tc.path)
			if err == nil {
				f.Close()
			}
			return err
		})
		if tc.ok != (err == nil) || (!tc.ok && (!errors.Is(err, ErrNotDir) || !strings.Contains(err.Error(), tc.path))) {
			t.Errorf("Dir(%s) = %v, want ok=%v", tc.path, err, tc.ok)
		}
	}
}

func TestReadLimited(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	atLimit := write("at", "12345")
	over := write("over", "123456")
	empty := write("empty", "")
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	os.Symlink(atLimit, link)
	for _, tc := range []struct {
		name, path string
		follow     Follow
		want       string
		wantErr    error
	}{
		{"at the limit", atLimit, NoFollow, "12345", nil},
		{"empty", empty, NoFollow, "", nil},
		{"one byte over", over, NoFollow, "", ErrTooLarge},
		{"fifo", fifo, FollowLinks, "", ErrNotRegular},
		{"symlink refused", link, NoFollow, "", ErrNotRegular},
		{"symlink followed", link, FollowLinks, "12345", nil},
		{"missing", filepath.Join(dir, "none"), NoFollow, "", os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []byte
			err := openWithin(t, func() error {
				var err error
				got, err = ReadLimited(tc.path, tc.follow, 5)
				return err
			})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || got != nil {
					t.Fatalf("got %q, %v; want %v", got, err, tc.wantErr)
				}
				if !errors.Is(err, os.ErrNotExist) && !strings.Contains(err.Error(), tc.path) {
					t.Errorf("error %q does not name %s", err, tc.path)
				}
				return
			}
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
