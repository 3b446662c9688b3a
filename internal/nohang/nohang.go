// SPDX-License-Identifier: Apache-2.0

// Package nohang runs a call that must not block (an open of a FIFO, a read of a
// hung folder) so that a regression fails the test cleanly instead of hanging it.
// The bound is generous and never a speed assertion.
package nohang

import (
	"testing"
	"time"
)

// Bound is how long a call may take before it counts as blocked.
const Bound = 20 * time.Second

// Call runs fn and returns its error; if fn has not returned within Bound, the
// test fails naming what blocked.
func Call(t testing.TB, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(Bound):
		t.Fatalf("%s blocked (a FIFO opened without O_NONBLOCK?)", what)
		return nil
	}
}
