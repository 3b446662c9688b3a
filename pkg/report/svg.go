// SPDX-License-Identifier: Apache-2.0

package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/coscheml/coscheml/pkg/sim"
)

// Plot geometry (pixels).
const (
	plotW, plotH             = 760, 440
	left, right, top, bottom = 70, 170, 40, 50
)

var palette = []string{"#d62728", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#7f7f7f", "#e377c2", "#bcbd22"}

type canvas struct {
	b          strings.Builder
	x0, x1     float64
	y0, y1     float64
	logX       bool
	xlab, ylab string
}

func newCanvas(title, xlab, ylab string) *canvas {
	c := &canvas{xlab: xlab, ylab: ylab}
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&c.b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&c.b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(title))
	return c
}

func (c *canvas) px(x float64) float64 {
	if c.logX {
		x, c0, c1 := math.Log10(x), math.Log10(c.x0), math.Log10(c.x1)
		return left + (x-c0)/(c1-c0)*(plotW-left-right)
	}
	return left + (x-c.x0)/(c.x1-c.x0)*(plotW-left-right)
}

func (c *canvas) py(y float64) float64 {
	return plotH - bottom - (y-c.y0)/(c.y1-c.y0)*(plotH-top-bottom)
}

// axes draws the frame, ticks and labels; fx/fy format tick values.
func (c *canvas) axes(xticks, yticks []float64, fx, fy func(float64) string) {
	x0, x1 := float64(left), float64(plotW-right)
	y0, y1 := float64(plotH-bottom), float64(top)
	fmt.Fprintf(&c.b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#333"/>`+"\n", x0, y1, x1-x0, y0-y1)
	for _, t := range xticks {
		x := c.px(t)
		fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#ddd"/><text x="%.1f" y="%g" text-anchor="middle">%s</text>`+"\n", x, y0, x, y1, x, y0+16, html.EscapeString(fx(t)))
	}
	for _, t := range yticks {
		y := c.py(t)
		fmt.Fprintf(&c.b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#ddd"/><text x="%g" y="%.1f" text-anchor="end">%s</text>`+"\n", x0, y, x1, y, x0-6, y+4, html.EscapeString(fy(t)))
	}
	fmt.Fprintf(&c.b, `<text x="%g" y="%d" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, plotH-12, html.EscapeString(c.xlab))
	fmt.Fprintf(&c.b, `<text transform="translate(16,%g) rotate(-90)" text-anchor="middle">%s</text>`+"\n", (y0+y1)/2, html.EscapeString(c.ylab))
}

func (c *canvas) line(xs, ys []float64, color string, dashed bool) {
	if len(xs) == 0 {
		return
	}
	var pts strings.Builder
	for i := range xs {
		fmt.Fprintf(&pts, "%.1f,%.1f ", c.px(xs[i]), c.py(ys[i]))
	}
	dash := ""
	if dashed {
		dash = ` stroke-dasharray="5,3"`
	}
	fmt.Fprintf(&c.b, `<polyline fill="none" stroke="%s" stroke-width="1.8"%s points="%s"/>`+"\n", color, dash, strings.TrimSpace(pts.String()))
}

func (c *canvas) legend(names []string) {
	for i, n := range names {
		y := top + 10 + 18*i
		x := plotW - right + 12
		fmt.Fprintf(&c.b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/><text x="%d" y="%d">%s</text>`+"\n", x, y, x+20, y, palette[i%len(palette)], x+26, y+4, html.EscapeString(n))
	}
}

func (c *canvas) done(w io.Writer) error {
	c.b.WriteString("</svg>\n")
	_, err := io.WriteString(w, c.b.String())
	return err
}

// firstSeed returns the runs of the lowest seed, in policy order of Summaries.
func firstSeed(in Input) []*sim.PolicyRun {
	if len(in.Runs) == 0 {
		return nil
	}
	seed := in.Runs[0].Seed
	for _, r := range in.Runs {
		seed = min(seed, r.Seed)
	}
	var out []*sim.PolicyRun
	for _, s := range in.Summaries {
		for _, r := range in.Runs {
			if r.Seed == seed && r.Policy == s.Policy && r.Result != nil {
				out = append(out, r)
			}
		}
	}
	return out
}

func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) {
		return []float64{lo}
	}
	step := math.Pow(10, math.Floor(math.Log10((hi-lo)/float64(n))))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(step*m) <= float64(n) {
			step *= m
			break
		}
	}
	var out []float64
	for k := math.Ceil(lo / step); k*step <= hi+step*1e-9; k++ {
		t := k * step
		if math.Abs(t) < step*1e-9 {
			t = 0 // no "-0%"
		}
		out = append(out, t)
	}
	return out
}

func fmtHours(s float64) string {
	h := s / 3600
	switch {
	case h >= 10:
		return fmt.Sprintf("%.0fh", h)
	case h >= 1:
		return fmt.Sprintf("%.1fh", h)
	case s >= 60:
		return fmt.Sprintf("%.0fm", s/60)
	}
	return fmt.Sprintf("%.0fs", s)
}

// JCTCDF plots the CDF of job completion times (log scale) per policy, first seed.
func JCTCDF(w io.Writer, in Input) error {
	runs := firstSeed(in)
	c := newCanvas("Job completion time CDF (seed "+seedOf(runs)+")", "job completion time (hours, log scale)", "fraction of jobs (cumulative, 0-1)")
	c.logX, c.y0, c.y1 = true, 0, 1
	c.x0, c.x1 = math.Inf(1), 0.0
	curves := make([][]float64, len(runs))
	for i, r := range runs {
		v := make([]float64, len(r.Result.Jobs))
		for k, j := range r.Result.Jobs {
			v[k] = max(j.JCT(), 1)
		}
		sort.Float64s(v)
		curves[i] = v
		if len(v) > 0 {
			c.x0, c.x1 = min(c.x0, v[0]), max(c.x1, v[len(v)-1])
		}
	}
	if !(c.x1 > c.x0) {
		c.x0, c.x1 = 1, 10
	}
	var xt []float64
	for d := math.Pow(10, math.Floor(math.Log10(c.x0))); d <= c.x1*1.0001; d *= 10 {
		if d >= c.x0 {
			xt = append(xt, d)
		}
	}
	c.axes(xt, niceTicks(0, 1, 5), fmtHours, func(v float64) string { return fmt.Sprintf("%.1f", v) })
	var names []string
	for i, v := range curves {
		var xs, ys []float64
		step := max(1, len(v)/400)
		for k := 0; k < len(v); k += step {
			xs = append(xs, v[k])
			ys = append(ys, float64(k+1)/float64(len(v)))
		}
		if len(v) > 0 {
			xs = append(xs, v[len(v)-1])
			ys = append(ys, 1)
		}
		c.line(xs, ys, palette[i%len(palette)], false)
		names = append(names, runs[i].Policy)
	}
	c.legend(names)
	return c.done(w)
}

func seedOf(runs []*sim.PolicyRun) string {
	if len(runs) == 0 {
		return "-"
	}
	return fmt.Sprint(runs[0].Seed)
}

// Utilization plots allocated GPUs / GPUs over time per policy, first seed.
func Utilization(w io.Writer, in Input) error {
	return timeline(w, in, "GPU utilization over time: allocated GPUs / GPUs", "allocated GPUs (% of all GPUs)", func(s sim.Sample) float64 { return s.Alloc })
}

// KernelUtilization plots the GPUs' kernel-busy fraction (NVML utilization.gpu,
// from measurements) over time per policy, first seed.
func KernelUtilization(w io.Writer, in Input) error {
	return timeline(w, in, "GPU busy over time: kernel utilization (measured)", "kernel busy (% of GPU time, mean over all GPUs)", func(s sim.Sample) float64 { return s.Kernel })
}

func timeline(w io.Writer, in Input, title, ylab string, val func(sim.Sample) float64) error {
	runs := firstSeed(in)
	c := newCanvas(title+" (seed "+seedOf(runs)+")", "time since first submission (hours)", ylab)
	c.x0, c.x1, c.y0, c.y1 = 0, 1, 0, 1.05
	for _, r := range runs {
		c.x1 = max(c.x1, r.Result.Makespan)
	}
	c.axes(niceTicks(0, c.x1, 8), niceTicks(0, 1, 5), fmtHours, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })
	var names []string
	for i, r := range runs {
		var xs, ys []float64
		for k, s := range r.Result.Timeline {
			if s.T > r.Result.Makespan {
				break
			}
			end := r.Result.Makespan
			if k+1 < len(r.Result.Timeline) {
				end = min(end, r.Result.Timeline[k+1].T)
			}
			xs = append(xs, s.T, end)
			ys = append(ys, val(s), val(s))
		}
		c.line(xs, ys, palette[i%len(palette)], false)
		names = append(names, r.Policy)
	}
	c.legend(names)
	return c.done(w)
}

// Improvement draws bars of each policy's change against the baseline: average
// JCT and makespan reduction, GPU and useful utilization gain (mean over seeds,
// whiskers at min and max).
func Improvement(w io.Writer, in Input) error {
	metrics := []struct {
		key, label string
		sign       float64
	}{
		{"avg_jct", "avg JCT cut", -1}, {"makespan", "makespan cut", -1},
		{"gpu_util", "alloc util", 1}, {"kernel_util", "kernel busy", 1}, {"useful_util", "useful util", 1},
	}
	// Each policy keeps its colour of the other plots (its place in Summaries).
	var pols []sim.PolicySummary
	var colors []string
	for i, s := range in.Summaries {
		if s.Policy != in.Baseline && s.VsBase != nil {
			pols = append(pols, s)
			colors = append(colors, palette[i%len(palette)])
		}
	}
	c := newCanvas("Improvement over "+in.Baseline+" (mean over seeds, whiskers min-max)", "", "change against "+in.Baseline+" (%, higher is better)")
	lo, hi := 0.0, 0.1
	for _, s := range pols {
		for _, m := range metrics {
			st := s.VsBase[m.key]
			a, b := m.sign*st.Min, m.sign*st.Max
			lo, hi = min(lo, a, b), max(hi, a, b)
		}
	}
	c.x0, c.x1, c.y0, c.y1 = 0, float64(len(metrics)), lo*1.1, hi*1.1
	c.axes(nil, niceTicks(c.y0, c.y1, 6), nil, func(v float64) string { return fmt.Sprintf("%.0f%%", 100*v) })
	zero := c.py(0)
	fmt.Fprintf(&c.b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#333"/>`+"\n", left, zero, plotW-right, zero)
	groupW := c.px(1) - c.px(0)
	barW := groupW * 0.8 / float64(max(1, len(pols)))
	for mi, m := range metrics {
		gx := c.px(float64(mi)) + groupW*0.1
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", c.px(float64(mi)+0.5), plotH-bottom+16, m.label)
		for pi, s := range pols {
			st := s.VsBase[m.key]
			v := m.sign * st.Mean
			x := gx + float64(pi)*barW
			y0, y1 := c.py(max(v, 0)), c.py(min(v, 0))
			fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.1f%%</title></rect>`+"\n", x, y0, barW*0.9, y1-y0, colors[pi], html.EscapeString(s.Policy), m.label, 100*v)
			if st.N > 1 {
				cx := x + barW*0.45
				fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`+"\n", cx, c.py(m.sign*st.Min), cx, c.py(m.sign*st.Max))
			}
		}
	}
	var names []string
	for _, s := range pols {
		names = append(names, s.Policy)
	}
	for i, n := range names {
		y := top + 10 + 18*i
		x := plotW - right + 12
		fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="20" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, y-5, colors[i], x+26, y+4, html.EscapeString(n))
	}
	return c.done(w)
}

// BelowFloorOverTime plots, per policy, the jobs below their floor in each
// block of sim.BelowFloorBlock jobs (in order of start, mean over seeds): the
// pair memory's learning shows as a falling line.
func BelowFloorOverTime(w io.Writer, in Input) error {
	names, means, blocks := belowFloorBlocks(in)
	c := newCanvas(fmt.Sprintf("Jobs below their floor per %d jobs (mean over seeds)", sim.BelowFloorBlock),
		"jobs started (count, in order of start)", fmt.Sprintf("jobs below floor per %d jobs", sim.BelowFloorBlock))
	hi := 1.0
	for _, m := range means {
		for _, v := range m {
			hi = max(hi, v)
		}
	}
	c.x0, c.x1, c.y0, c.y1 = 0, float64(max(blocks, 1)*sim.BelowFloorBlock), 0, hi*1.1
	c.axes(niceTicks(0, c.x1, 8), niceTicks(0, c.y1, 5), func(v float64) string { return fmt.Sprintf("%.0f", v) }, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	for i, m := range means {
		var xs, ys []float64
		for k, v := range m {
			xs = append(xs, float64(k*sim.BelowFloorBlock), float64((k+1)*sim.BelowFloorBlock))
			ys = append(ys, v, v)
		}
		c.line(xs, ys, palette[i%len(palette)], false)
	}
	c.legend(names)
	return c.done(w)
}
