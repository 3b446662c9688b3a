// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/coscheml/coscheml/cmd/libcoscheml/internal/cqtest"
	"github.com/coscheml/coscheml/pkg/submit"
)

// TestABIGenerated reruns the generator on coscheml_abi.h: the checked-in
// abi_gen.go must be what it writes (run `go generate ./cmd/libcoscheml`
// after changing a field list).
func TestABIGenerated(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/abigen", "-header", "../../plugin-c/coscheml_abi.h", "-queue", "queue.h",
		"-out", filepath.Join(dir, "abi_gen.go"), "-cqtest", filepath.Join(dir, "cqtest_gen.go"))
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("abigen: %v\n%s", err, msg)
	}
	for gen, have := range map[string]string{"abi_gen.go": "abi_gen.go", "cqtest_gen.go": "internal/cqtest/abi_gen.go"} {
		want, err := os.ReadFile(filepath.Join(dir, gen))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(have)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what coscheml_abi.h makes: run `go generate ./cmd/libcoscheml`\n--- generated now:\n%s", have, want)
		}
	}
}

// TestJobFieldsListed: every field of submit.JobFields comes from
// coscheml_abi.h's job list, except those made from its META fields, so a Go
// field the shim never fills cannot go unnoticed.
func TestJobFieldsListed(t *testing.T) {
	fromMeta := []string{"Set", "Admin"} // decideJob, from flags
	typ := reflect.TypeFor[submit.JobFields]()
	for i := range typ.NumField() {
		name := typ.Field(i).Name
		if !slices.Contains(listedJobFields, name) && !slices.Contains(fromMeta, name) {
			t.Errorf("submit.JobFields.%s is in no X(...) line of COSCHEML_JOB_FIELDS", name)
		}
	}
	for _, name := range listedJobFields {
		if _, ok := typ.FieldByName(name); !ok {
			t.Errorf("COSCHEML_JOB_FIELDS names submit.JobFields.%s, which does not exist", name)
		}
	}
}

// TestJobRoundTrip sends a job with every listed field set to a value of its
// own through coscheml_decide, by the worker (queue.c's copy of the job) and on
// the calling thread (no worker), and checks that each reaches its
// submit.JobFields field.
func TestJobRoundTrip(t *testing.T) {
	got := make(chan submit.JobFields, 1)
	decide := func(j submit.JobFields) submit.Result {
		got <- j
		return submit.Result{Code: submit.Unchanged}
	}
	testDecide.Store(&decide)
	t.Cleanup(func() {
		coscheml_fini()
		testDecide.Store(nil)
	})
	if rc, _ := initGo(writeConfig(t, ""), 0x160508, ""); rc != 0 {
		t.Fatalf("init: %d (%v)", rc, engine.Load().Problems())
	}
	check := func(t *testing.T) {
		if rc := cqtest.DecideAll(); rc != int(submit.Unchanged) {
			t.Fatalf("rc=%d", rc)
		}
		j := reflect.ValueOf(<-got)
		for k, name := range listedJobFields {
			v := j.FieldByName(name)
			var want any
			switch v.Kind() {
			case reflect.String:
				want = fmt.Sprintf("f%d", k)
			case reflect.Uint32:
				want = uint32(1000 + k)
			case reflect.Int64:
				want = int64(1000 + k)
			case reflect.Bool:
				want = true
			default:
				t.Fatalf("%s: kind %v", name, v.Kind())
			}
			if v.Interface() != want {
				t.Errorf("%s = %v, want %v", name, v.Interface(), want)
			}
		}
	}
	if err := startWorker(); err != nil {
		t.Fatal(err)
	}
	t.Run("worker", check)
	stopWorker()
	t.Run("calling thread", check)
}

// TestLibraryExports: libcoscheml.so's dynamic symbols hold the interface and
// Go's own cgo machinery, nothing that exists for tests: the queue's C
// functions are hidden, and no cgo wrapper of a test-only call is linked in.
func TestLibraryExports(t *testing.T) {
	so := cLibrary(t)
	f, err := elf.Open(so)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	testOnly := regexp.MustCompile(`_Cfunc_(coscheml_decide|cq_mentions|cq_pass_open|cq_get_timeout_ms)$`)
	var exported []string
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF {
			continue
		}
		exported = append(exported, s.Name)
		// cq_decide_go is Go's (//export), called back by queue.c.
		if strings.HasPrefix(s.Name, "cq_") && s.Name != "cq_decide_go" || testOnly.MatchString(s.Name) {
			t.Errorf("%s exports %s", filepath.Base(so), s.Name)
		}
	}
	for _, want := range []string{"coscheml_abi_version", "coscheml_init", "coscheml_decide", "coscheml_reconfigure", "coscheml_fini", "coscheml_library_abi"} {
		if !slices.Contains(exported, want) {
			t.Errorf("%s does not export %s", filepath.Base(so), want)
		}
	}
}
