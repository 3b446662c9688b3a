// SPDX-License-Identifier: Apache-2.0

// Package floors is the one definition of the speed floors: the lowest predicted
// speed sharing may push a job of each class to. The configuration reads them
// (speed_floor in etc/coscheml.yaml) and the placement policies apply them; both use
// this type, so the two can never drift apart.
package floors

import "github.com/coscheml/coscheml/pkg/profile"

// Floors holds one floor per job class.
type Floors struct {
	HPC   float64 `yaml:"hpc"`
	Train float64 `yaml:"train"`
	Infer float64 `yaml:"infer"`
}

// Default are the safe defaults (etc/coscheml.yaml's): inference, which serves
// latency targets, is protected most.
func Default() Floors { return Floors{HPC: 0.75, Train: 0.75, Infer: 0.9} }

// For returns the floor of class cl; a job of no known class gets the strictest one,
// so a mistake never loosens protection.
func (f Floors) For(cl profile.Class) float64 {
	switch cl {
	case profile.ClassHPC:
		return f.HPC
	case profile.ClassTrain:
		return f.Train
	case profile.ClassInfer:
		return f.Infer
	}
	return max(f.HPC, f.Train, f.Infer)
}

// Floor is For by class name ("hpc", "train", "infer").
func (f Floors) Floor(class string) float64 { return f.For(profile.Class(class)) }
