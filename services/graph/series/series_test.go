package series

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

var t0 = time.Unix(1_800_000_000, 0).Truncate(24 * time.Hour)

func TestWriteReadRestart(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Minute, Levels)
	if err != nil {
		t.Fatal(err)
	}
	// 20 minutes of eth0 at i*1000 in, 2*i*1000 out; eth1 only from minute 10.
	var now time.Time
	for i := range 20 {
		now = t0.Add(time.Duration(i)*time.Minute + 30*time.Second)
		xs := []Sample{{Name: "if:eth0", In: float64(i * 1000), Out: float64(2 * i * 1000)}}
		if i >= 10 {
			xs = append(xs, Sample{Name: "if:eth1", In: 7, Out: 8})
		}
		if err := s.Write(now, xs); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Store) {
		t.Helper()
		pts, ok, err := s.Read("if:eth0", 0, now)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if len(pts) != 180 {
			t.Fatalf("%d points", len(pts))
		}
		for i := range 20 {
			p := pts[180-20+i]
			if !p.Known || p.In != float64(i*1000) || p.Out != float64(2*i*1000) {
				t.Fatalf("minute %d: %+v", i, p)
			}
		}
		if pts[180-21].Known {
			t.Fatal("a minute before the first sample has data")
		}
		// day level: 5-minute rows 0..3 complete: averages of i*1000 over each.
		day, _, _ := s.Read("if:eth0", 1, now)
		for c := range 4 {
			p := day[len(day)-4+c]
			want := float64((5*c + 2) * 1000)
			if !p.Known || p.In != want || p.InMax != float64((5*c+4)*1000) || p.OutMax != float64(2*(5*c+4)*1000) {
				t.Fatalf("5-minute row %d: %+v, want in %v", c, p, want)
			}
		}
		day1, _, _ := s.Read("if:eth1", 1, now)
		if p := day1[len(day1)-2]; !p.Known || p.In != 7 || p.OutMax != 8 {
			t.Fatalf("eth1 5-minute row: %+v", p)
		}
		if p := day1[len(day1)-3]; p.Known {
			t.Fatalf("eth1 has a 5-minute row before it was born: %+v", p)
		}
		if _, ok, _ := s.Read("if:none", 0, now); ok {
			t.Fatal("unknown series found")
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, time.Minute, Levels)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
}

// TestGrowKeepsRows: more series than slots widen every archive and keep
// what was there.
func TestGrowKeepsRows(t *testing.T) {
	s, err := Open(t.TempDir(), time.Minute, Levels)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := t0.Add(30 * time.Second)
	if err := s.Write(at, []Sample{{Name: "a", In: 1, Out: 2}}); err != nil {
		t.Fatal(err)
	}
	var xs []Sample
	for i := range 3 * minSlots {
		xs = append(xs, Sample{Name: fmt.Sprint("s", i), In: float64(i), Out: 0})
	}
	at = at.Add(time.Minute)
	if err := s.Write(at, xs); err != nil {
		t.Fatal(err)
	}
	pts, _, _ := s.Read("a", 0, at)
	if p := pts[len(pts)-2]; p.In != 1 || p.Out != 2 {
		t.Fatalf("a after growing: %+v", p)
	}
	if p := pts[len(pts)-1]; p.Known {
		t.Fatalf("a has data in a round without it: %+v", p)
	}
	pts, _, _ = s.Read("s700", 0, at)
	if p := pts[len(pts)-1]; p.In != 700 {
		t.Fatalf("s700: %+v", p)
	}
}

// TestTornWrites: a row whose stamp was cleared (a crash mid-write) reads
// as no data, the rows around it as they were; a torn index line is
// dropped.
func TestTornWrites(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Minute, Levels)
	if err != nil {
		t.Fatal(err)
	}
	var at time.Time
	for i := range 3 {
		at = t0.Add(time.Duration(i)*time.Minute + time.Second)
		if err := s.Write(at, []Sample{{Name: "x", In: float64(i + 1), Out: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	// The crash: the last row's stamp cleared, garbage in its data.
	a := s.levels[0]
	r := int((at.UnixNano() / int64(time.Minute)) % int64(a.Rows))
	if err := a.setStamp(r, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := a.f.WriteAt([]byte{1, 2, 3}, a.rowOff(r)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, _ := os.OpenFile(filepath.Join(dir, "series.idx"), os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString("half-writ")
	f.Close()
	s, err = Open(dir, time.Minute, Levels)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pts, _, _ := s.Read("x", 0, at)
	n := len(pts)
	if pts[n-1].Known || pts[n-2].In != 2 || pts[n-3].In != 1 {
		t.Fatalf("after the crash: %+v %+v %+v", pts[n-3], pts[n-2], pts[n-1])
	}
	if s.Has("half-writ") || s.Len() != 1 {
		t.Fatal("the torn index line was kept")
	}
}

// TestWraps: after more rounds than rows, a row holds the newest step and
// an old time reads as no data; a gap reads as no data.
func TestWraps(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second, Levels)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var at time.Time
	for i := range 400 {
		if i >= 300 && i < 310 {
			continue // the service was down
		}
		at = t0.Add(time.Duration(i)*time.Second + time.Millisecond)
		if err := s.Write(at, []Sample{{Name: "x", In: float64(i), Out: float64(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	pts, _, _ := s.Read("x", 0, at)
	for i, p := range pts {
		sec := 400 - 180 + i
		gap := sec >= 300 && sec < 310
		if p.Known == gap || (!gap && p.In != float64(sec)) {
			t.Fatalf("second %d: %+v", sec, p)
		}
	}
	if !math.IsNaN(pts[300-220].In) {
		t.Fatal("gap not NaN")
	}
}

// TestPartialStep: a coarser level's step that holds now is made from
// the finer rows so far, down to the minutes, so the day and year graphs
// have data from the first rounds on.
func TestPartialStep(t *testing.T) {
	s, err := Open(t.TempDir(), time.Minute, Levels)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var now time.Time
	for i := range 23 {
		now = t0.Add(time.Duration(i)*time.Minute + 30*time.Second)
		if err := s.Write(now, []Sample{{Name: "x", In: float64(i * 1000), Out: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	day, _, _ := s.Read("x", 1, now)
	if p := day[len(day)-1]; !p.Known || p.In != 21000 || p.InMax != 22000 || !p.Start.Equal(t0.Add(20*time.Minute)) {
		t.Fatalf("the day's current 5 minutes: %+v", p)
	}
	if p := day[len(day)-2]; p.In != 17000 || p.InMax != 19000 {
		t.Fatalf("the day's last complete 5 minutes: %+v", p)
	}
	year, _, _ := s.Read("x", 4, now)
	if p := year[len(year)-1]; !p.Known || p.InMax != 22000 || p.Out != 1 || !p.Start.Equal(t0) {
		t.Fatalf("the year's current day: %+v", p)
	}
	if p := year[len(year)-2]; p.Known {
		t.Fatalf("the day before the first sample: %+v", p)
	}
}

// TestSlotTakenAgain: a series without a sample for longer than the
// coarsest level covers gives its slot to the next new series, which
// sees none of the old data; the index says so after a restart.
func TestSlotTakenAgain(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second, Levels)
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Millisecond)
	if err := s.Write(at, []Sample{{Name: "old", In: 5, Out: 5}, {Name: "kept", In: 1, Out: 1}}); err != nil {
		t.Fatal(err)
	}
	// A year (of 1-second base steps) later, at the end of a 5-step: the
	// slots are looked over.
	n := (at.Add(time.Duration(s.horizon())*time.Second).UnixNano()/int64(time.Second)/5+1)*5 - 1
	at = time.Unix(n, int64(time.Millisecond))
	if err := s.Write(at, []Sample{{Name: "kept", In: 1, Out: 1}}); err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Second)
	if err := s.Write(at, []Sample{{Name: "new", In: 9, Out: 9}, {Name: "kept", In: 1, Out: 1}}); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		if s.Len() != 2 || s.Has("old") || s.slot["new"] != 0 || s.slot["kept"] != 1 {
			t.Fatalf("slots: %v", s.slot)
		}
		for level := range Levels {
			pts, _, _ := s.Read("new", level, at)
			for i, p := range pts {
				if p.Known && (i != len(pts)-1 || p.In != 9) {
					t.Fatalf("level %d point %d of the new series: %+v", level, i, p)
				}
			}
		}
	}
	check(s)
	s.Close()
	s, err = Open(dir, time.Second, Levels)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	check(s)
}

// TestIndexCompacted: the index rewritten with a line a slot reads back
// the same, and takes appends after it.
func TestIndexCompacted(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, time.Second, Levels)
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Add(time.Millisecond)
	if err := s.Write(at, []Sample{{Name: "a", In: 1}, {Name: "b", In: 2}}); err != nil {
		t.Fatal(err)
	}
	s.idxLines = 5000 // as after many slots taken again
	if err := s.compactIndex(); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(at.Add(time.Second), []Sample{{Name: "c", In: 3}}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw, _ := os.ReadFile(filepath.Join(dir, "series.idx"))
	if want := fmt.Sprintf("0\ta\t%d\n1\tb\t%d\n2\tc\t%d\n", at.Unix(), at.Unix(), at.Unix()+1); string(raw) != want {
		t.Fatalf("index:\n%q\nwant\n%q", raw, want)
	}
	s, err = Open(dir, time.Second, Levels)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Len() != 3 || s.slot["c"] != 2 || s.idxLines != 3 {
		t.Fatalf("after reopening: %v, %d lines", s.slot, s.idxLines)
	}
}

// TestLongLevels: the OLTs' archives consolidate through the quarter's
// 6-hour steps into the year and two years.
func TestLongLevels(t *testing.T) {
	s, err := Open(t.TempDir(), time.Second, LongLevels)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var at time.Time
	for i := range 361 {
		at = t0.Add(time.Duration(i)*time.Second + time.Millisecond)
		if err := s.Write(at, []Sample{{Name: "pon:a:0/1/0", In: float64(i), Out: 1}, {Name: "pon:a:0/1/1", In: 1, Out: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	q := s.Level("quarter")
	if q != 4 || s.Level("2years") != 6 || s.Level("fortnight") != -1 {
		t.Fatalf("levels: quarter %d", q)
	}
	pts, _, _ := s.Read("pon:a:0/1/0", q, at)
	if p := pts[len(pts)-2]; !p.Known || p.In != 179.5 || p.InMax != 359 {
		t.Fatalf("the quarter's first 6 hours: %+v", p)
	}
	pts, _, _ = s.Read("pon:a:0/1/0", s.Level("2years"), at)
	if p := pts[len(pts)-1]; !p.Known || p.InMax != 360 {
		t.Fatalf("the two years' current step: %+v", p)
	}
	if got := s.Names("pon:a:0/1/"); len(got) != 2 || got[1] != "pon:a:0/1/1" {
		t.Fatalf("names: %v", got)
	}
}
