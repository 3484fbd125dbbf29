// Package chart draws a traffic graph as MRTG and Cacti do: a 600x200
// plot of in (a filled green area) and out (a blue line) in bits per
// second over a period, a y axis in SI units, a time axis labelled for
// the period's length, a title, and a legend with each direction's
// current, average and maximum. Pure Go: image/png and x/image's fixed
// font.
package chart

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The layout: the plot's size and where it sits in the image.
const (
	PlotW, PlotH = 600, 200
	Left, Top    = 80, 28
	Width        = Left + PlotW + 24
	Height       = Top + PlotH + 72
)

// Colours of the two directions, as MRTG's.
var (
	InColor  = color.RGBA{0, 200, 0, 255}
	OutColor = color.RGBA{0, 0, 255, 255}
	bg       = color.RGBA{255, 255, 255, 255}
	plotBg   = color.RGBA{248, 248, 248, 255}
	gridC    = color.RGBA{210, 210, 210, 255}
	ink      = color.RGBA{0, 0, 0, 255}
)

// Point is one step of the series: from T for Step, the rates in bits
// per second (NaN: no data).
type Point struct {
	T             time.Time
	In, Out       float64
	InMax, OutMax float64
}

// Graph is what is drawn.
type Graph struct {
	Title           string
	InName, OutName string // "In"/"Out", or "Download"/"Upload" for a client
	Start, End      time.Time
	Step            time.Duration
	Points          []Point
	// Unit follows the values' SI prefix: "" is bits per second ("b/s");
	// error counters are drawn in "frames/s".
	Unit string
}

// Scale is the y axis's top in bits per second for the points: a round
// number (1, 2, 2.5 or 5 times a power of ten) at or above the largest
// average, 1 kb/s when there is nothing.
func Scale(pts []Point) float64 {
	top := 0.0
	for _, p := range pts {
		for _, v := range []float64{p.In, p.Out} {
			if !math.IsNaN(v) && v > top {
				top = v
			}
		}
	}
	if top <= 0 {
		return 1000
	}
	mag := math.Pow(10, math.Floor(math.Log10(top)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= top {
			return m * mag
		}
	}
	return 10 * mag
}

// X is the image column of time t.
func (g *Graph) X(t time.Time) int {
	span := g.End.Sub(g.Start)
	return Left + int(float64(PlotW)*float64(t.Sub(g.Start))/float64(span))
}

// Y is the image row of rate v on scale top.
func Y(v, top float64) int {
	y := Top + PlotH - int(math.Round(float64(PlotH)*v/top))
	return min(max(y, Top), Top+PlotH)
}

// Draw renders g as a PNG.
func Draw(g *Graph) ([]byte, error) {
	if !g.End.After(g.Start) {
		return nil, fmt.Errorf("chart: empty period")
	}
	img := image.NewRGBA(image.Rect(0, 0, Width, Height))
	fill(img, img.Bounds(), bg)
	fill(img, image.Rect(Left, Top, Left+PlotW, Top+PlotH), plotBg)
	top := Scale(g.Points)
	unit := g.Unit
	if unit == "" {
		unit = "b/s"
	}
	d := &font.Drawer{Dst: img, Src: image.NewUniform(ink), Face: basicfont.Face7x13}

	// Grid and y labels: five lines, the scale's quarters.
	for i := 0; i <= 4; i++ {
		v := top * float64(i) / 4
		y := Y(v, top)
		hline(img, Left, Left+PlotW, y, gridC)
		label := SI(v) + unit
		text(d, Left-6-d.MeasureString(label).Round(), y+4, label)
	}
	// Time ticks and labels.
	every, layout := ticks(g.End.Sub(g.Start))
	for t := g.Start.Truncate(every); !t.After(g.End); t = t.Add(every) {
		if t.Before(g.Start) {
			continue
		}
		x := g.X(t)
		vline(img, x, Top, Top+PlotH, gridC)
		label := t.Format(layout)
		lx := x - d.MeasureString(label).Round()/2
		if lx >= Left-20 && lx+d.MeasureString(label).Round() <= Width {
			text(d, lx, Top+PlotH+14, label)
		}
	}

	// In: a filled area; out: a line over it.
	prevY := -1
	for _, p := range g.Points {
		x0, x1 := g.X(p.T), g.X(p.T.Add(g.Step))
		x0, x1 = max(x0, Left), min(x1, Left+PlotW)
		if x1 <= x0 {
			x1 = x0 + 1
		}
		if !math.IsNaN(p.In) {
			fill(img, image.Rect(x0, Y(p.In, top), x1, Top+PlotH), InColor)
		}
	}
	for _, p := range g.Points {
		x0, x1 := g.X(p.T), g.X(p.T.Add(g.Step))
		x0, x1 = max(x0, Left), min(x1, Left+PlotW)
		if x1 <= x0 {
			x1 = x0 + 1
		}
		if math.IsNaN(p.Out) {
			prevY = -1
			continue
		}
		y := Y(p.Out, top)
		if prevY >= 0 {
			vline(img, x0, min(prevY, y), max(prevY, y)+1, OutColor)
		}
		hline(img, x0, x1, y, OutColor)
		if y > Top {
			hline(img, x0, x1, y-1, OutColor)
		}
		prevY = y
	}
	// The frame.
	hline(img, Left, Left+PlotW, Top+PlotH, ink)
	vline(img, Left-1, Top, Top+PlotH+1, ink)

	// Title and legend.
	text(d, Left, Top-10, g.Title)
	y := Top + PlotH + 36
	for _, dir := range []struct {
		name string
		c    color.RGBA
		avg  func(Point) float64
		max  func(Point) float64
	}{
		{g.InName, InColor, func(p Point) float64 { return p.In }, func(p Point) float64 { return p.InMax }},
		{g.OutName, OutColor, func(p Point) float64 { return p.Out }, func(p Point) float64 { return p.OutMax }},
	} {
		cur, avg, mx := Summary(g.Points, dir.avg, dir.max)
		fill(img, image.Rect(Left, y-9, Left+10, y+1), dir.c)
		text(d, Left+16, y, fmt.Sprintf("%-9s current %10s   average %10s   max %10s",
			dir.name, rate(cur, unit), rate(avg, unit), rate(mx, unit)))
		y += 16
	}
	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Summary is the latest known value, the average of the known values
// and the largest maximum (NaN when none is known).
func Summary(pts []Point, avg, mx func(Point) float64) (cur, mean, top float64) {
	cur, top = math.NaN(), math.NaN()
	sum, n := 0.0, 0
	for _, p := range pts {
		v := avg(p)
		if math.IsNaN(v) {
			continue
		}
		cur = v
		sum += v
		n++
		m := mx(p)
		if math.IsNaN(m) {
			m = v
		}
		if math.IsNaN(top) || m > top {
			top = m
		}
	}
	mean = math.NaN()
	if n > 0 {
		mean = sum / float64(n)
	}
	return cur, mean, top
}

func rate(v float64, unit string) string {
	if math.IsNaN(v) {
		return "-"
	}
	return SI(v) + unit
}

// SI writes v with an SI prefix and three significant digits at most:
// "0 ", "950 ", "1.25 k", "12.5 M", "2.5 G".
func SI(v float64) string {
	prefixes := []string{"", "k", "M", "G", "T", "P"}
	i := 0
	for math.Abs(v) >= 1000 && i < len(prefixes)-1 {
		v /= 1000
		i++
	}
	digits := 2 // 1.25, 12.5, 125
	if math.Abs(v) >= 10 {
		digits = 1
	}
	if math.Abs(v) >= 100 {
		digits = 0
	}
	s := strconv.FormatFloat(v, 'f', digits, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + " " + prefixes[i]
}

// ticks chooses the time axis's step for a period of span (at most about
// eight labels) and the labels' layout.
func ticks(span time.Duration) (time.Duration, string) {
	day := 24 * time.Hour
	for _, c := range []struct {
		every  time.Duration
		layout string
	}{
		{time.Second, "15:04:05"}, {2 * time.Second, "15:04:05"}, {5 * time.Second, "15:04:05"},
		{10 * time.Second, "15:04:05"}, {15 * time.Second, "15:04:05"}, {30 * time.Second, "15:04:05"},
		{time.Minute, "15:04"}, {2 * time.Minute, "15:04"}, {5 * time.Minute, "15:04"},
		{10 * time.Minute, "15:04"}, {15 * time.Minute, "15:04"}, {30 * time.Minute, "15:04"},
		{time.Hour, "15:04"}, {2 * time.Hour, "15:04"}, {3 * time.Hour, "15:04"},
		{6 * time.Hour, "15:04"}, {12 * time.Hour, "Jan 02 15h"},
		{day, "Mon 02"}, {2 * day, "Jan 02"}, {7 * day, "Jan 02"}, {14 * day, "Jan 02"},
		{30 * day, "Jan"}, {61 * day, "Jan"},
	} {
		if span/c.every <= 8 {
			return c.every, c.layout
		}
	}
	return 91 * day, "Jan 2006"
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func hline(img *image.RGBA, x0, x1, y int, c color.RGBA) {
	fill(img, image.Rect(x0, y, x1, y+1), c)
}

func vline(img *image.RGBA, x, y0, y1 int, c color.RGBA) {
	fill(img, image.Rect(x, y0, x+1, y1), c)
}

func text(d *font.Drawer, x, y int, s string) {
	d.Dot = fixed.P(x, y)
	d.DrawString(s)
}
