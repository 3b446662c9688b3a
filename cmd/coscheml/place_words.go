// SPDX-License-Identifier: Apache-2.0

package main

import "fmt"

// decisionWords names a placement decision for people. The engine's action
// "exclusive" means "an idle GPU": when the job takes fewer than all of its slots,
// a later job may still share that GPU, so calling it EXCLUSIVE misleads.
func decisionWords(action string, gpus []placeGPU) string {
	switch action {
	case "share":
		return "SHARE a GPU with the jobs already on it"
	case "exclusive":
		for _, g := range gpus {
			if g.Slots < g.GPUSlots {
				return fmt.Sprintf("IDLE GPU: alone for now; it takes %d of %d slots, so a later job may share it where the model allows", g.Slots, g.GPUSlots)
			}
		}
		return "WHOLE GPU: no other job can join it"
	case "wait":
		return "WAIT: no acceptable GPU now; the job stays queued"
	}
	return action
}
