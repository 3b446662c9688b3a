// SPDX-License-Identifier: Apache-2.0

package cliextra

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

func testApp(out *bytes.Buffer) *cli.App {
	app := &cli.App{
		Name:     "demo-prog",
		Usage:    "a test program",
		Writer:   out,
		Commands: []*cli.Command{{Name: "predict", Usage: "predict speeds", Action: func(*cli.Context) error { return nil }}},
		// keep urfave/cli from calling os.Exit on cli.Exit errors
		ExitErrHandler: func(*cli.Context, error) {},
	}
	Extend(app)
	return app
}

func TestExtend(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    []string // substrings of the output
		wantErr bool
	}{
		{"version", []string{"--version"}, []string{"demo-prog version "}, false},
		{"man page lists commands", []string{"man"}, []string{".TH demo-prog 1", "predict"}, false},
		{"bash completion", []string{"completion", "bash"}, []string{"complete -o bashdefault -o default -F _demo_prog_complete demo-prog"}, false},
		{"zsh completion", []string{"completion", "zsh"}, []string{"#compdef demo-prog", "compdef _demo_prog demo-prog"}, false},
		{"completion of commands", []string{"--generate-bash-completion"}, []string{"predict", "completion"}, false},
		{"unknown shell", []string{"completion", "fish"}, nil, true},
		{"no shell", []string{"completion"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			args := append([]string{"demo-prog"}, tt.args...)
			// urfave/cli's completion reads os.Args, not the Run arguments.
			old := os.Args
			t.Cleanup(func() { os.Args = old })
			os.Args = args
			err := testApp(&out).Run(args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestManHidesItselfFromCompletion(t *testing.T) {
	var out bytes.Buffer
	old := os.Args
	t.Cleanup(func() { os.Args = old })
	os.Args = []string{"demo-prog", "--generate-bash-completion"}
	if err := testApp(&out).Run(os.Args); err != nil {
		t.Fatal(err)
	}
	for _, w := range strings.Fields(out.String()) {
		if w == "man" {
			t.Errorf("hidden man command offered for completion: %q", out.String())
		}
	}
}

// The generated scripts must at least parse in the shells they are for.
func TestCompletionScriptsParse(t *testing.T) {
	for _, shell := range []string{"bash", "zsh"} {
		t.Run(shell, func(t *testing.T) {
			path, err := exec.LookPath(shell)
			if err != nil {
				t.Skipf("%s not installed", shell)
			}
			script, err := Completion("coscheml-train", shell)
			if err != nil {
				t.Fatal(err)
			}
			f := filepath.Join(t.TempDir(), "c."+shell)
			if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(path, "-n", f).CombinedOutput(); err != nil {
				t.Fatalf("%s -n: %v\n%s", shell, err, out)
			}
		})
	}
}
