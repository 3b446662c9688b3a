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
