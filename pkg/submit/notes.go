// SPDX-License-Identifier: Apache-2.0

package submit

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// problemNotes are the engine's problem notes: each is logged once, with the
// next Result, and again only when its message changes. Decisions, the
// background loops and Close all write them, so they have a lock of their own.
type problemNotes struct {
	mu      sync.Mutex
	byKey   map[string]string // key -> last reported message ("" = fine)
	pending []string          // lines not logged yet
	// raised counts the keys whose message is not "" (written under mu), so
	// that clearing a note when none is raised, twice per decision, takes
	// neither the lock nor the map.
	raised atomic.Int32
	// startNote is what the first load's prep said, for coscheml_init's log;
	// startNoteMissed: WaitReady gave up before it was known, so it is logged
	// as a note with the next job instead.
	startNote       string
	startNoteMissed atomic.Bool
}

func newProblemNotes() *problemNotes {
	return &problemNotes{byKey: map[string]string{}}
}

// note records a problem under key; it is logged once (with the next Result) and
// again only when the message changes. An empty msg marks the problem solved.
func (e *Engine) note(key, msg string) {
	if msg == "" && e.notes.raised.Load() == 0 {
		return // nothing to clear
	}
	if e.notes.add(key, msg) {
		e.publishPass() // the next job must go to Go to log it
	}
}

// add records the note; true when it changed anything.
func (n *problemNotes) add(key, msg string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	prev := n.byKey[key]
	if prev == msg {
		return false
	}
	n.byKey[key] = msg
	switch {
	case prev == "":
		n.raised.Add(1)
	case msg == "":
		n.raised.Add(-1)
	}
	switch {
	case msg != "":
		n.pending = append(n.pending, msg)
	case prev != "" && key != "panic" && key != "panic-bg":
		n.pending = append(n.pending, key+" ok again")
	}
	if len(n.pending) > 20 {
		n.pending = append(n.pending[:19], "more problems not shown")
	}
	return true
}

// push queues a line to log once (an event, not a problem).
func (n *problemNotes) push(line string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) < 20 {
		n.pending = append(n.pending, line)
	}
}

// get is the message in effect under key ("" when fine).
func (n *problemNotes) get(key string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.byKey[key]
}

// take returns the pending problems, one per line, and clears them.
func (n *problemNotes) take() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) == 0 {
		return ""
	}
	s := strings.Join(n.pending, "\n")
	n.pending = n.pending[:0]
	return s
}

// quiet says whether nothing waits to be logged and neither key is raised.
func (n *problemNotes) quiet(keys ...string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.pending) != 0 {
		return false
	}
	for _, k := range keys {
		if n.byKey[k] != "" {
			return false
		}
	}
	return true
}

// setStartNote records what the first load's prep said.
func (n *problemNotes) setStartNote(s string) {
	n.mu.Lock()
	n.startNote = s
	n.mu.Unlock()
}

// Problems returns the problems in effect now (for CLIs and tests). Notes
// under an "info-" key are logged like problems but degrade nothing (the pair
// memory: without it the model alone decides), so they are not listed.
func (e *Engine) Problems() []string {
	n := e.notes
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for k, m := range n.byKey {
		if m != "" && !strings.HasPrefix(k, "info-") {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}
