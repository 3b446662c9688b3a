// SPDX-License-Identifier: Apache-2.0

package doccheck

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// evaluationMaxLines bounds docs/evaluation.md: current results and how to
// reproduce them; superseded figures go to CHANGELOG.md's measurement history,
// what the simulator models to docs/simulator.md.
const evaluationMaxLines = 600

func TestEvaluationLength(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "evaluation.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > evaluationMaxLines {
		t.Errorf("docs/evaluation.md has %d lines, over %d: move superseded figures to CHANGELOG.md (Measurement history)", n, evaluationMaxLines)
	}
}
