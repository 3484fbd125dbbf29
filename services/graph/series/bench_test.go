package series

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkRound is one sampling round's storage write (a minute's row of
// every series, and the coarser rows whose step ends with it, on average)
// beside its near-limit: the same bytes written by one os.WriteFile and
// synced.
func BenchmarkRound(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		xs := make([]Sample, n)
		for i := range xs {
			xs[i] = Sample{Name: fmt.Sprintf("mac:02:00:00:%02X:%02X:%02X", i>>16, (i>>8)&255, i&255), In: float64(i), Out: 1}
		}
		b.Run(fmt.Sprintf("series=%d", n), func(b *testing.B) {
			s, err := Open(b.TempDir(), time.Minute, Levels)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			at := t0.Add(30 * time.Second)
			if err := s.Write(at, xs); err != nil { // the series' slots
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				at = at.Add(time.Minute)
				if err := s.Write(at, xs); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("near-limit/series=%d", n), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "row")
			data := make([]byte, 8*n)
			for b.Loop() {
				if err := os.WriteFile(path, data, 0o640); err != nil {
					b.Fatal(err)
				}
				f, _ := os.Open(path)
				_ = f.Sync()
				f.Close()
			}
		})
	}
}

// BenchmarkRead is one graph's read (a level's rows of one series) in a
// store of 100,000 series.
func BenchmarkRead(b *testing.B) {
	const n = 100_000
	xs := make([]Sample, n)
	for i := range xs {
		xs[i] = Sample{Name: fmt.Sprint("s", i), In: float64(i), Out: 1}
	}
	s, err := Open(b.TempDir(), time.Minute, Levels)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	at := t0.Add(30 * time.Second)
	for range 10 {
		if err := s.Write(at, xs); err != nil {
			b.Fatal(err)
		}
		at = at.Add(time.Minute)
	}
	for _, level := range []int{0, 1, 4} {
		b.Run(Levels[level].Name, func(b *testing.B) {
			for b.Loop() {
				if _, ok, err := s.Read("s54321", level, at); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
		// The near-limit: the same values read from a file of their own.
		b.Run("near-limit/"+Levels[level].Name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "one")
			if err := os.WriteFile(path, make([]byte, Levels[level].Rows*cellOf(level)), 0o640); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := os.ReadFile(path); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
