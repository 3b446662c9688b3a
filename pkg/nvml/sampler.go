// SPDX-License-Identifier: Apache-2.0

package nvml

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sample is one GPU's readings at one sampling instant, in the profile's units.
type Sample struct {
	At     time.Time
	GPU    int
	Values [NumMetrics]float64
	Have   uint16 // bit m set: Values[m] was read
	// Per-process utilization, where the driver offers it: the number of processes
	// with a sample in this interval and the sum of their SM utilization.
	// Procs < 0: not offered.
	Procs      int
	ProcSMUtil float64
}

// Has reports whether metric m was read in this sample.
func (s *Sample) Has(m Metric) bool { return s.Have&(1<<uint(m)) != 0 }

// Set stores a reading of metric m.
func (s *Sample) Set(m Metric, v float64) {
	s.Values[m] = v
	s.Have |= 1 << uint(m)
}

// Sink receives what a Sampler reads: the Summary and the sample-file Writer are
// sinks.
type Sink interface {
	// Device is called once for each GPU that could be opened.
	Device(gpu int, name string) error
	// Round is called once per sampling instant with one sample per live GPU.
	Round(at time.Time, samples []Sample) error
	// Note records something the profile's reader should know; partial marks the
	// profile incomplete (an unsupported field, a lost GPU).
	Note(text string, partial bool) error
}

// ErrNoGPUs: every GPU the sampler was asked to read is gone.
var ErrNoGPUs = errors.New("no GPU left to sample")

type gpuState struct {
	index     int
	dev       Device
	lost      bool
	off       [NumMetrics]bool // unsupported: not asked again
	errNoted  [NumMetrics]bool // a transient error was noted once
	procOff   bool
	procSince uint64
	rounds    int
}

// Sampler reads a fixed set of GPUs into a Sink. It is not safe for concurrent use.
type Sampler struct {
	sink Sink
	gpus []*gpuState
}

// NewSampler opens the GPUs (all of them when gpus is empty) of an initialized
// backend. A GPU that cannot be opened is noted (partial) and skipped; only when
// none can be opened is it an error.
func NewSampler(b Backend, gpus []int, sink Sink) (*Sampler, error) {
	if len(gpus) == 0 {
		n, err := b.DeviceCount()
		if err != nil {
			return nil, fmt.Errorf("counting GPUs: %w", err)
		}
		for i := 0; i < n; i++ {
			gpus = append(gpus, i)
		}
	}
	s := &Sampler{sink: sink}
	for _, i := range gpus {
		d, err := b.Device(i)
		if err != nil {
			if nerr := sink.Note(fmt.Sprintf("gpu %d: cannot open: %v", i, err), true); nerr != nil {
				return nil, nerr
			}
			continue
		}
		name, err := d.Name()
		if err != nil {
			name = "unknown"
		}
		if err := sink.Device(i, name); err != nil {
			return nil, err
		}
		s.gpus = append(s.gpus, &gpuState{index: i, dev: d})
	}
	if len(s.gpus) == 0 {
		return nil, ErrNoGPUs
	}
	return s, nil
}

// Run samples now and then every interval until ctx is done or maxRounds rounds
// were taken (0: no limit). It returns nil when stopped by ctx or the limit and
// ErrNoGPUs when every GPU is gone.
func (s *Sampler) Run(ctx context.Context, interval time.Duration, maxRounds int) error {
	if interval <= 0 {
		return fmt.Errorf("sampling interval %v: must be positive", interval)
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for rounds := 0; ; rounds++ {
		if maxRounds > 0 && rounds >= maxRounds {
			return s.sink.Note(fmt.Sprintf("sample limit of %d rounds reached; later run time not sampled", maxRounds), false)
		}
		if err := s.SampleOnce(time.Now()); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// SampleOnce reads every live GPU once, stamps the samples with at and hands them
// to the sink as one round. Tests drive it with synthetic times.
func (s *Sampler) SampleOnce(at time.Time) error {
	out := make([]Sample, 0, len(s.gpus))
	live := 0
	for _, g := range s.gpus {
		if g.lost {
			continue
		}
		smp, err := s.read(g, at)
		if err != nil {
			return err
		}
		if g.lost {
			continue
		}
		live++
		g.rounds++
		out = append(out, smp)
	}
	if live == 0 {
		return ErrNoGPUs
	}
	return s.sink.Round(at, out)
}

// read takes one GPU's sample. Errors are classified: unsupported fields are
// switched off, a lost GPU is dropped, anything else skips this one reading.
func (s *Sampler) read(g *gpuState, at time.Time) (Sample, error) {
	smp := Sample{At: at, GPU: g.index, Procs: -1}
	// handle classifies err for metric m; it returns false when the GPU is gone
	// and the round must stop for it.
	handle := func(err error, ms ...Metric) (bool, error) {
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, ErrGPULost):
			g.lost = true
			return false, s.sink.Note(fmt.Sprintf("gpu %d: lost after %d samples: %v", g.index, g.rounds, err), true)
		case errors.Is(err, ErrNotInitialized):
			return false, err
		case errors.Is(err, ErrNotSupported):
			for _, m := range ms {
				g.off[m] = true
				if nerr := s.sink.Note(fmt.Sprintf("gpu %d: %s not supported", g.index, m), true); nerr != nil {
					return false, nerr
				}
			}
			return true, nil
		}
		for _, m := range ms {
			if !g.errNoted[m] {
				g.errNoted[m] = true
				if nerr := s.sink.Note(fmt.Sprintf("gpu %d: %s: read failed, such readings are skipped: %v", g.index, m, err), false); nerr != nil {
					return false, nerr
				}
			}
		}
		return true, nil
	}

	if !g.off[SMUtil] {
		u, err := g.dev.Utilization()
		if ok, herr := handle(err, SMUtil, MemBWUtil); !ok || herr != nil {
			return smp, herr
		}
		if err == nil {
			smp.Set(SMUtil, float64(u.GPU))
			smp.Set(MemBWUtil, float64(u.Memory))
		}
	}
	if !g.off[MemUsedMiB] {
		m, err := g.dev.MemoryInfo()
		if ok, herr := handle(err, MemUsedMiB); !ok || herr != nil {
			return smp, herr
		}
		if err == nil {
			smp.Set(MemUsedMiB, float64(m.Used)/(1<<20))
		}
	}
	for _, tx := range []bool{true, false} {
		m := PCIeRxMBps
		if tx {
			m = PCIeTxMBps
		}
		if g.off[m] {
			continue
		}
		v, err := g.dev.PCIeThroughput(tx)
		if ok, herr := handle(err, m); !ok || herr != nil {
			return smp, herr
		}
		if err == nil {
			smp.Set(m, float64(v)/1000)
		}
	}
	if !g.off[PowerW] {
		v, err := g.dev.PowerUsage()
		if ok, herr := handle(err, PowerW); !ok || herr != nil {
			return smp, herr
		}
		if err == nil {
			smp.Set(PowerW, float64(v)/1000)
		}
	}
	if !g.off[SMClockMHz] {
		v, err := g.dev.SMClock()
		if ok, herr := handle(err, SMClockMHz); !ok || herr != nil {
			return smp, herr
		}
		if err == nil {
			smp.Set(SMClockMHz, float64(v))
		}
	}
	if !g.procOff {
		ps, err := g.dev.ProcessUtilization(g.procSince)
		switch {
		case err == nil:
			smp.Procs = len(ps)
			for _, p := range ps {
				smp.ProcSMUtil += float64(p.SMUtil)
				if p.TimeStamp > g.procSince {
					g.procSince = p.TimeStamp
				}
			}
		case errors.Is(err, ErrGPULost):
			if _, herr := handle(err); herr != nil {
				return smp, herr
			}
		default:
			// Per-process utilization is extra information, not a profile field:
			// its absence does not make the profile partial.
			g.procOff = true
			if nerr := s.sink.Note(fmt.Sprintf("gpu %d: per-process utilization not offered: %v", g.index, err), false); nerr != nil {
				return smp, nerr
			}
		}
	}
	return smp, nil
}
