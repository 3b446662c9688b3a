// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"slices"
	"testing"
)

// TestNotesRaised: clearing a note is skipped only while no note is raised
// (problemNotes.raised); a raised note is still cleared, said "ok again" once, and
// the count follows every change, including a message replaced by another.
func TestNotesRaised(t *testing.T) {
	e := &Engine{notes: newProblemNotes()}
	steps := []struct {
		key, msg    string
		wantRaised  int32
		wantPending []string
	}{
		{"a", "", 0, nil},
		{"a", "a broke", 1, []string{"a broke"}},
		{"b", "", 1, nil},
		{"a", "a broke", 1, nil},
		{"a", "a broke worse", 1, []string{"a broke worse"}},
		{"b", "b broke", 2, []string{"b broke"}},
		{"a", "", 1, []string{"a ok again"}},
		{"a", "", 1, nil},
		{"b", "", 0, []string{"b ok again"}},
		{"b", "", 0, nil},
	}
	for i, s := range steps {
		e.note(s.key, s.msg)
		e.notes.mu.Lock()
		got := e.notes.pending
		e.notes.pending = nil
		e.notes.mu.Unlock()
		if e.notes.raised.Load() != s.wantRaised || !slices.Equal(got, s.wantPending) {
			t.Errorf("step %d note(%q, %q): raised %d, pending %q; want %d, %q", i, s.key, s.msg, e.notes.raised.Load(), got, s.wantRaised, s.wantPending)
		}
	}
}
