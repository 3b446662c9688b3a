package report

import (
	"fmt"
	"html"
	"io"
)

// BelowFloor draws, per class, each policy's number of jobs whose true speed fell
// under their class's speed floor (mean over seeds, whiskers min-max): where
// interference-blind sharing costs most and Co-scheML differs most from it.
func BelowFloor(w io.Writer, in Input) error {
	c := newCanvas("Jobs below their speed floor (mean over seeds, whiskers min-max)", "job class", "jobs below floor (count per run)")
	classes := []string{"hpc", "train", "infer"}
	hi := 1.0
	for _, s := range in.Summaries {
		for _, cl := range classes {
			if st, ok := s.ByClass[cl]["below_floor"]; ok {
				hi = max(hi, st.Max, st.Mean)
			}
		}
	}
	c.x0, c.x1, c.y0, c.y1 = 0, float64(len(classes)), 0, hi*1.1
	c.axes(nil, niceTicks(0, c.y1, 6), nil, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	groupW := c.px(1) - c.px(0)
	barW := groupW * 0.8 / float64(max(1, len(in.Summaries)))
	for ci, cl := range classes {
		gx := c.px(float64(ci)) + groupW*0.1
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", c.px(float64(ci)+0.5), plotH-bottom+16, cl)
		for pi, s := range in.Summaries {
			st, ok := s.ByClass[cl]["below_floor"]
			if !ok {
				continue
			}
			x := gx + float64(pi)*barW
			y0, y1 := c.py(st.Mean), c.py(0)
			fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %.1f jobs</title></rect>`+"\n",
				x, y0, barW*0.9, y1-y0, palette[pi%len(palette)], html.EscapeString(s.Policy), cl, st.Mean)
			if st.N > 1 {
				cx := x + barW*0.45
				fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`+"\n", cx, c.py(st.Min), cx, c.py(st.Max))
			}
		}
	}
	var names []string
	for _, s := range in.Summaries {
		names = append(names, s.Policy)
	}
	for i, n := range names {
		y := top + 10 + 18*i
		x := plotW - right + 12
		fmt.Fprintf(&c.b, `<rect x="%d" y="%d" width="20" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", x, y-5, palette[i%len(palette)], x+26, y+4, html.EscapeString(n))
	}
	return c.done(w)
}
