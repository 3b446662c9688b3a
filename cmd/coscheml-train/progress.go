// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressEvery is how often a long stage says it is still running.
const progressEvery = 5 * time.Second

// stage reports a long step on w (stderr: stdout stays the report): its name at
// the start, "still running" every progressEvery, and its time at the end, so a
// cross-validation of several seconds is not silent. The returned func ends it.
func stage(w io.Writer, name string) (done func()) {
	t0 := time.Now()
	fmt.Fprintf(w, "coscheml-train: %s ...\n", name)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				fmt.Fprintf(w, "coscheml-train: %s: still running (%v)\n", name, time.Since(t0).Round(time.Second))
			}
		}
	}()
	return func() {
		close(stop)
		wg.Wait()
		fmt.Fprintf(w, "coscheml-train: %s: done in %v\n", name, time.Since(t0).Round(10*time.Millisecond))
	}
}
