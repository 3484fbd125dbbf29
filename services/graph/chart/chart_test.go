package chart

import (
	"bytes"
	"image/png"
	"math"
	"testing"
	"time"
)

// TestDraw: the PNG has the layout's size; where the data has in traffic
// the plot is green from the rate's height down, where it has none the
// plot is not green; out's line is blue at its height.
func TestDraw(t *testing.T) {
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	step := time.Minute
	g := &Graph{Title: "eth0 - hour", InName: "In", OutName: "Out", Start: start, End: start.Add(180 * step), Step: step}
	for i := range 180 {
		p := Point{T: start.Add(time.Duration(i) * step), In: math.NaN(), Out: math.NaN(), InMax: math.NaN(), OutMax: math.NaN()}
		switch {
		case i >= 60 && i < 120:
			p.In, p.Out, p.InMax, p.OutMax = 8e6, 2e6, 9e6, 3e6
		case i >= 120:
			p.In, p.Out, p.InMax, p.OutMax = 0, 0, 0, 0
		}
		g.Points = append(g.Points, p)
	}
	data, err := Draw(g)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != Width || b.Dy() != Height {
		t.Fatalf("size %v", b)
	}
	top := Scale(g.Points)
	if top != 1e7 {
		t.Fatalf("scale %v, want 10 Mb/s", top)
	}
	is := func(x, y int, c interface{ RGBA() (r, g, b, a uint32) }) bool {
		r1, g1, b1, _ := img.At(x, y).RGBA()
		r2, g2, b2, _ := c.RGBA()
		return r1 == r2 && g1 == g2 && b1 == b2
	}
	mid := g.X(start.Add(90 * step))
	if !is(mid, Y(8e6, top)+2, InColor) || !is(mid, Top+PlotH-2, InColor) {
		t.Error("no green under the in rate where there is traffic")
	}
	if is(mid, Y(8e6, top)-3, InColor) {
		t.Error("green above the in rate")
	}
	if !is(mid, Y(2e6, top), OutColor) {
		t.Error("out's line is not at its rate")
	}
	for _, m := range []int{30, 150} {
		x := g.X(start.Add(time.Duration(m) * step))
		for y := Top + 1; y < Top+PlotH-1; y++ {
			if is(x, y, InColor) {
				t.Fatalf("green at minute %d (row %d) where there is no traffic", m, y)
			}
		}
	}
}

func TestSI(t *testing.T) {
	for v, want := range map[float64]string{0: "0 ", 950: "950 ", 1500: "1.5 k", 12e6: "12 M", 2.5e9: "2.5 G", 250e3: "250 k", 1250: "1.25 k", 12.5e6: "12.5 M"} {
		if got := SI(v); got != want {
			t.Errorf("SI(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestSummary(t *testing.T) {
	pts := []Point{{In: 1, InMax: 4}, {In: math.NaN(), InMax: math.NaN()}, {In: 3, InMax: 3}}
	cur, avg, mx := Summary(pts, func(p Point) float64 { return p.In }, func(p Point) float64 { return p.InMax })
	if cur != 3 || avg != 2 || mx != 4 {
		t.Fatal(cur, avg, mx)
	}
}

// BenchmarkDraw is one graph's drawing and PNG encoding (a day's 288
// points).
func BenchmarkDraw(b *testing.B) {
	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	step := 5 * time.Minute
	g := &Graph{Title: "Interface eth0 - day", InName: "In", OutName: "Out", Start: start, End: start.Add(288 * step), Step: step}
	for i := range 288 {
		v := 3e6 + 2e6*math.Sin(float64(i)/20)
		g.Points = append(g.Points, Point{T: start.Add(time.Duration(i) * step), In: v, Out: v / 3, InMax: v, OutMax: v / 3})
	}
	for b.Loop() {
		if _, err := Draw(g); err != nil {
			b.Fatal(err)
		}
	}
}
