// Package series holds the traffic graphs' samples: for every series (an
// interface, a client) an in and an out rate per sampling step, kept
// round-robin at five resolutions like RRDtool's archives, so that disk
// and memory stay bounded whatever the uptime.
//
// Layout on disk (one directory):
//
//   - series.idx: lines "slot<TAB>name<TAB>born": the series' slot in every
//     archive, and the first base step it has data for (cells of earlier
//     rows are not its). A later line for a slot gives it to another
//     series: a slot whose series had no sample for as long as the
//     coarsest level covers (a year) holds none of its data any more and
//     is taken by the next new series, so the slots are bounded by the
//     series seen within a year, not by uptime. The file is rewritten
//     with a line a slot when it has twice as many.
//   - series.seen: each slot's latest sampled step, rewritten every five
//     base steps (only used to tell when a slot is free).
//   - <level>.rra, one per Level: a header (magic, base step, rows, cell
//     size, slots per row), then one stamp per row (the step that row
//     holds, 0 for none), then the rows: row = step mod rows, each row a
//     slot per series (float32 in and out average; the coarser levels also
//     in and out maximum). NaN is "no sample".
//
// One sampling round writes one row of the finest level: a single
// sequential write of 8 bytes per series, whatever their number, instead
// of a file per series. When a coarser step completes its row is made
// from the finer level's rows (average of averages, maximum of maxima)
// and written the same way. A row is written as: its stamp cleared and
// synced, the row written and synced, the stamp set; a crash mid-write
// leaves that row without a stamp (read as no data) and every other row
// as it was. New series are appended (and synced) to the index before any
// row refers to them; a torn last line is dropped on open. When the slots
// run out each archive is copied with wider rows to a new file that
// replaces the old one by rename.
package series

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Level is one resolution: rows of Factor base steps each.
type Level struct {
	Name   string
	Factor int64
	Rows   int
}

// Levels are the archives of the router's own series (interfaces,
// clients), finest first; each coarser one is made from the one before
// it (Factor a multiple of the previous one's, the first 1). With the
// base step of a minute: 3 hours of minutes, a day of 5 minutes, a week
// of 30 minutes, 31 days of 2 hours, 366 days of a day.
var Levels = []Level{
	{"hour", 1, 180},
	{"day", 5, 288},
	{"week", 30, 336},
	{"month", 120, 372},
	{"year", 1440, 366},
}

// LongLevels are the OLTs' series' archives: Levels with a quarter (92
// days of 6 hours) and two years (732 days of 2 days).
var LongLevels = []Level{
	{"hour", 1, 180},
	{"day", 5, 288},
	{"week", 30, 336},
	{"month", 120, 372},
	{"quarter", 360, 368},
	{"year", 1440, 366},
	{"2years", 2880, 366},
}

// Level is the index of the level named name, or -1.
func (s *Store) Level(name string) int {
	for i, a := range s.levels {
		if a.Name == name {
			return i
		}
	}
	return -1
}

// LevelOf is level i.
func (s *Store) LevelOf(i int) Level { return s.levels[i].Level }

const (
	magic      = "RRAv1\x00\x00\x00"
	headerSize = 64
	minSlots   = 256
)

// Sample is one series' rates over one base step.
type Sample struct {
	Name    string
	In, Out float64
}

// Point is one row of a series: averages and maxima (NaN: no data).
type Point struct {
	Start         time.Time
	In, Out       float64
	InMax, OutMax float64
	Known         bool
}

// Store is the open set of archives of one directory.
type Store struct {
	dir  string
	step time.Duration

	mu       sync.RWMutex
	idx      *os.File
	idxLines int
	slot     map[string]int
	born     []int64 // per slot: first base step of the series
	seen     []int64 // per slot: latest base step with a sample
	names    []string
	free     []int // slots whose series has no data left in any level
	levels   []*archive
}

// archive is one level's file.
type archive struct {
	Level
	f      *os.File
	path   string
	cell   int // bytes per series: 8 (in, out) or 16 (and their maxima)
	slots  int
	stamps []int64
}

func (a *archive) rowBytes() int64    { return int64(a.slots * a.cell) }
func (a *archive) dataOff() int64     { return dataOffset(a.Rows) }
func (a *archive) rowOff(r int) int64 { return a.dataOff() + int64(r)*a.rowBytes() }

func dataOffset(rows int) int64 {
	n := int64(headerSize + rows*8)
	return (n + 4095) &^ 4095
}

// Open opens (or makes) the store in dir with the given base step and
// levels (Levels or LongLevels). Files made for another base step are
// started afresh: their rows would mean other times.
func Open(dir string, step time.Duration, levels []Level) (*Store, error) {
	if step <= 0 {
		return nil, errors.New("series: base step must be positive")
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	s := &Store{dir: dir, step: step, slot: map[string]int{}}
	if err := s.loadIndex(); err != nil {
		return nil, err
	}
	for i, l := range levels {
		// An archive of another step (or none) starts empty: the series
		// keep their slots, with no rows.
		a, err := openArchive(filepath.Join(dir, l.Name+".rra"), l, cellOf(i), step, max(minSlots, len(s.names)))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.levels = append(s.levels, a)
	}
	return s, nil
}

func cellOf(level int) int {
	if level == 0 {
		return 8
	}
	return 16
}

// Step is the base step.
func (s *Store) Step() time.Duration { return s.step }

// Close closes the files.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	if s.idx != nil {
		errs = append(errs, s.idx.Close())
	}
	for _, a := range s.levels {
		errs = append(errs, a.f.Close())
	}
	return errors.Join(errs...)
}

func (s *Store) loadIndex() error {
	path := filepath.Join(s.dir, "series.idx")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return err
	}
	// A line without its newline was being appended when the process
	// died: it never had rows, so it is dropped.
	whole := bytes.LastIndexByte(data, '\n') + 1
	if whole < len(data) {
		if err := f.Truncate(int64(whole)); err != nil {
			f.Close()
			return err
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(data[:whole]))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s.idxLines++
		f3 := strings.Split(sc.Text(), "\t")
		var j int
		var b int64
		var err error
		if len(f3) == 3 {
			if j, err = strconv.Atoi(f3[0]); err == nil {
				b, err = strconv.ParseInt(f3[2], 10, 64)
			}
		}
		if len(f3) != 3 || err != nil || j < 0 || j > len(s.names) {
			f.Close()
			return fmt.Errorf("series: %s line %d unreadable", path, s.idxLines)
		}
		s.put(j, f3[1], b)
	}
	s.loadSeen()
	if _, err := f.Seek(0, 2); err != nil {
		f.Close()
		return err
	}
	s.idx = f
	return nil
}

// put gives slot j to name, born at base step b: a slot taken again
// drops the series it had.
func (s *Store) put(j int, name string, b int64) {
	if j == len(s.names) {
		s.names = append(s.names, name)
		s.born = append(s.born, b)
		s.seen = append(s.seen, b)
	} else {
		if k, ok := s.slot[s.names[j]]; ok && k == j {
			delete(s.slot, s.names[j])
		}
		s.names[j], s.born[j], s.seen[j] = name, b, b
	}
	s.slot[name] = j
}

// The slots' latest samples are kept in series.seen (8 bytes a slot),
// rewritten (temporary file, rename) every 5 base steps: after a crash a
// series looks up to that much older than it is, which only matters for
// when its slot may be taken again, a year on.
func (s *Store) loadSeen() {
	data, _ := os.ReadFile(filepath.Join(s.dir, "series.seen"))
	for j := 0; j < len(s.seen) && 8*j+8 <= len(data); j++ {
		s.seen[j] = max(s.seen[j], int64(binary.LittleEndian.Uint64(data[8*j:])))
	}
}

func (s *Store) saveSeen() error {
	path := filepath.Join(s.dir, "series.seen")
	data := make([]byte, 8*len(s.seen))
	for j, v := range s.seen {
		binary.LittleEndian.PutUint64(data[8*j:], uint64(v))
	}
	if err := os.WriteFile(path+".new", data, 0o640); err != nil {
		return err
	}
	return os.Rename(path+".new", path)
}

// horizon is how many base steps the coarsest level covers: a series
// without a sample for longer has no data left, and its slot is free.
func (s *Store) horizon() int64 {
	l := s.levels[len(s.levels)-1]
	return l.Factor * int64(l.Rows)
}

// scanFree lists the slots free at base step n.
func (s *Store) scanFree(n int64) {
	s.free = s.free[:0]
	for j := len(s.seen) - 1; j >= 0; j-- {
		if s.seen[j] < n-s.horizon() {
			s.free = append(s.free, j)
		}
	}
}

// compactIndex rewrites series.idx with one line a slot once it holds
// twice as many lines (slots taken again append theirs).
func (s *Store) compactIndex() error {
	if s.idxLines <= 2*len(s.names)+1024 {
		return nil
	}
	path := filepath.Join(s.dir, "series.idx")
	var b []byte
	for j, name := range s.names {
		b = fmt.Appendf(b, "%d\t%s\t%d\n", j, name, s.born[j])
	}
	f, err := os.OpenFile(path+".new", os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(path+".new", path)
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		f.Close()
		return err
	}
	s.idx.Close()
	s.idx, s.idxLines = f, len(s.names)
	return nil
}

func openArchive(path string, l Level, cell int, step time.Duration, slots int) (*archive, error) {
	a := &archive{Level: l, path: path, cell: cell}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err == nil {
		var h [headerSize]byte
		if _, err := f.ReadAt(h[:], 0); err == nil && string(h[:8]) == magic &&
			int64(binary.LittleEndian.Uint64(h[8:])) == int64(step) &&
			int(binary.LittleEndian.Uint32(h[16:])) == l.Rows &&
			int(binary.LittleEndian.Uint32(h[20:])) == cell {
			a.f, a.slots = f, int(binary.LittleEndian.Uint32(h[24:]))
			st := make([]byte, l.Rows*8)
			if _, err := f.ReadAt(st, headerSize); err != nil {
				f.Close()
				return nil, err
			}
			a.stamps = make([]int64, l.Rows)
			for i := range a.stamps {
				a.stamps[i] = int64(binary.LittleEndian.Uint64(st[i*8:]))
			}
			if a.slots < slots {
				if err := a.grow(slots, step); err != nil {
					return nil, err
				}
			}
			return a, nil
		}
		f.Close()
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	// None, or another step's: a new empty file in its place.
	f, err = writeNew(path, l, cell, step, slots, func(*os.File) error { return nil })
	if err != nil {
		return nil, err
	}
	a.f, a.slots, a.stamps = f, slots, make([]int64, l.Rows)
	return a, nil
}

// writeNew makes path anew with an empty archive of slots per row (fill
// writes its rows), synced and renamed into place.
func writeNew(path string, l Level, cell int, step time.Duration, slots int, fill func(*os.File) error) (*os.File, error) {
	tmp := path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, err
	}
	h := make([]byte, headerSize)
	copy(h, magic)
	binary.LittleEndian.PutUint64(h[8:], uint64(step))
	binary.LittleEndian.PutUint32(h[16:], uint32(l.Rows))
	binary.LittleEndian.PutUint32(h[20:], uint32(cell))
	binary.LittleEndian.PutUint32(h[24:], uint32(slots))
	err = errors.Join(
		f.Truncate(dataOffset(l.Rows)+int64(l.Rows)*int64(slots*cell)),
		func() error { _, err := f.WriteAt(h, 0); return err }(),
	)
	if err == nil {
		err = fill(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, err
	}
	return f, nil
}

// grow copies the archive into a file of slots per row: every row and
// its stamp, the new slots empty (no series has data in them before it
// is born).
func (a *archive) grow(slots int, step time.Duration) error {
	old := a.f
	f, err := writeNew(a.path, a.Level, a.cell, step, slots, func(f *os.File) error {
		st := make([]byte, a.Rows*8)
		for i, v := range a.stamps {
			binary.LittleEndian.PutUint64(st[i*8:], uint64(v))
		}
		if _, err := f.WriteAt(st, headerSize); err != nil {
			return err
		}
		buf := make([]byte, a.rowBytes())
		off := dataOffset(a.Rows)
		for r := range a.Rows {
			if a.stamps[r] == 0 {
				continue
			}
			if _, err := old.ReadAt(buf, a.rowOff(r)); err != nil {
				return err
			}
			if _, err := f.WriteAt(buf, off+int64(r)*int64(slots*a.cell)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	old.Close()
	a.f, a.slots = f, slots
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// setStamp writes row r's stamp.
func (a *archive) setStamp(r int, v int64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	if _, err := a.f.WriteAt(b[:], headerSize+int64(r)*8); err != nil {
		return err
	}
	a.stamps[r] = v
	return nil
}

// writeRow puts row data for step n (in this level's steps) in place: the
// stamp cleared and synced first, so that a row torn by a crash is never
// read as the step it was, nor as the one it was becoming.
func (a *archive) writeRow(n int64, data []byte) error {
	r := int(n % int64(a.Rows))
	if err := a.setStamp(r, 0); err != nil {
		return err
	}
	if err := a.f.Sync(); err != nil {
		return err
	}
	if _, err := a.f.WriteAt(data, a.rowOff(r)); err != nil {
		return err
	}
	if err := a.f.Sync(); err != nil {
		return err
	}
	return a.setStamp(r, n+1)
}

// holds reports whether the archive holds step n.
func (a *archive) holds(n int64) bool { return n >= 0 && a.stamps[n%int64(a.Rows)] == n+1 }

// newest is the latest step the archive holds, or -1.
func (a *archive) newest() int64 {
	var m int64
	for _, v := range a.stamps {
		m = max(m, v)
	}
	return m - 1
}

// Write stores one round: the rates of each series over the base step
// holding t. Series not named have no data for it. Coarser rows whose
// steps are complete are made from the finer ones.
func (s *Store) Write(t time.Time, samples []Sample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := t.UnixNano() / int64(s.step)
	slots, err := s.addSeries(samples, n)
	if err != nil {
		return err
	}
	a := s.levels[0]
	row := make([]byte, a.rowBytes())
	nan := math.Float32bits(float32(math.NaN()))
	for i := 0; i < len(row); i += 4 {
		binary.LittleEndian.PutUint32(row[i:], nan)
	}
	for k, x := range samples {
		s.seen[slots[k]] = n
		i := slots[k] * a.cell
		binary.LittleEndian.PutUint32(row[i:], math.Float32bits(float32(x.In)))
		binary.LittleEndian.PutUint32(row[i+4:], math.Float32bits(float32(x.Out)))
	}
	if err := a.writeRow(n, row); err != nil {
		return err
	}
	if err := s.consolidate(n); err != nil {
		return err
	}
	if (n+1)%s.levels[1].Factor == 0 {
		s.scanFree(n)
		return errors.Join(s.saveSeen(), s.compactIndex())
	}
	return nil
}

// addSeries returns the samples' slots, giving the series not seen
// before one: their index lines appended and synced in one write, and
// every archive widened when the slots run out.
func (s *Store) addSeries(samples []Sample, n int64) ([]int, error) {
	var b []byte
	added := 0
	slots := make([]int, len(samples))
	for k, x := range samples {
		if j, ok := s.slot[x.Name]; ok {
			slots[k] = j
			continue
		}
		if x.Name == "" || strings.ContainsAny(x.Name, "\t\n") {
			return nil, fmt.Errorf("series: invalid series name %q", x.Name)
		}
		j := len(s.names)
		for len(s.free) > 0 {
			f := s.free[len(s.free)-1]
			s.free = s.free[:len(s.free)-1]
			if s.seen[f] < n-s.horizon() {
				j = f
				break
			}
		}
		slots[k] = j
		s.put(j, x.Name, n)
		b = fmt.Appendf(b, "%d\t%s\t%d\n", j, x.Name, n)
		added++
	}
	if added == 0 {
		return slots, nil
	}
	if _, err := s.idx.Write(b); err != nil {
		return nil, err
	}
	if err := s.idx.Sync(); err != nil {
		return nil, err
	}
	s.idxLines += added
	for _, a := range s.levels {
		if len(s.names) <= a.slots {
			continue
		}
		n := max(minSlots, a.slots)
		for n < len(s.names) {
			n *= 2
		}
		if err := a.grow(n, s.step); err != nil {
			return nil, err
		}
	}
	return slots, nil
}

// consolidate makes each coarser level's rows whose steps ended by base
// step n, from the finer level's rows still held (a step missed while
// the service was down is made when it comes back, if its rows remain).
func (s *Store) consolidate(n int64) error {
	for i := 1; i < len(s.levels); i++ {
		fine, a := s.levels[i-1], s.levels[i]
		ratio := a.Factor / fine.Factor
		last := (n+1)/a.Factor - 1 // the latest complete step of a
		first := max(a.newest()+1, last-int64(fine.Rows)/ratio+1)
		for c := first; c <= last; c++ {
			if a.holds(c) {
				continue
			}
			if err := s.makeRow(fine, a, c, ratio); err != nil {
				return err
			}
		}
	}
	return nil
}

// makeRow writes step c of a from its ratio rows in fine.
func (s *Store) makeRow(fine, a *archive, c, ratio int64) error {
	held := false
	for k := c * ratio; k < (c+1)*ratio; k++ {
		held = held || fine.holds(k)
	}
	if !held {
		return nil
	}
	slots := a.slots
	sum := make([]float64, 2*slots)
	cnt := make([]int32, 2*slots)
	mx := make([]float32, 2*slots)
	for i := range mx {
		mx[i] = float32(math.Inf(-1))
	}
	buf := make([]byte, fine.rowBytes())
	for k := c * ratio; k < (c+1)*ratio; k++ {
		if !fine.holds(k) {
			continue
		}
		if _, err := fine.f.ReadAt(buf, fine.rowOff(int(k%int64(fine.Rows)))); err != nil {
			return err
		}
		base := k * fine.Factor // first base step of k
		for j := range min(len(s.names), slots, fine.slots) {
			if base+fine.Factor-1 < s.born[j] {
				continue
			}
			o := j * fine.cell
			for d := range 2 {
				v := math.Float32frombits(binary.LittleEndian.Uint32(buf[o+4*d:]))
				if v != v {
					continue
				}
				m := v
				if fine.cell == 16 {
					m = math.Float32frombits(binary.LittleEndian.Uint32(buf[o+8+4*d:]))
				}
				sum[2*j+d] += float64(v)
				cnt[2*j+d]++
				mx[2*j+d] = max(mx[2*j+d], m)
			}
		}
	}
	row := make([]byte, a.rowBytes())
	nan := math.Float32bits(float32(math.NaN()))
	for j := range slots {
		o := j * a.cell
		for d := range 2 {
			avg, top := nan, nan
			if cnt[2*j+d] > 0 {
				avg = math.Float32bits(float32(sum[2*j+d] / float64(cnt[2*j+d])))
				top = math.Float32bits(mx[2*j+d])
			}
			binary.LittleEndian.PutUint32(row[o+4*d:], avg)
			binary.LittleEndian.PutUint32(row[o+8+4*d:], top)
		}
	}
	return a.writeRow(c, row)
}

// Has reports whether the series is known.
func (s *Store) Has(name string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	_, ok := s.slot[name]
	return ok
}

// Len is the number of series.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.names)
}

// Span is how long level covers.
func (s *Store) Span(level int) time.Duration {
	l := s.levels[level].Level
	return time.Duration(int64(l.Rows)*l.Factor) * s.step
}

// Read returns the series' rows of level, oldest first, one per row,
// ending with the step that holds now: for a coarser level that step is
// not complete, and its point is made from the finer levels' rows so far
// (so a day graph shows the last minutes, and has data from the first
// round on). ok is false when the series is unknown.
func (s *Store) Read(name string, level int, now time.Time) (pts []Point, ok bool, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	j, ok := s.slot[name]
	if !ok {
		return nil, false, nil
	}
	a := s.levels[level]
	nb := now.UnixNano() / int64(s.step)
	last := nb / a.Factor
	pts = make([]Point, a.Rows)
	for i := range pts {
		c := last - int64(a.Rows) + 1 + int64(i)
		if c == last && level > 0 && !a.holds(c) {
			pts[i], err = s.partial(j, level, c, nb)
		} else {
			pts[i], err = s.cell(j, level, c)
		}
		if err != nil {
			return nil, true, err
		}
	}
	return pts, true, nil
}

// cell is slot j's point of step c of level (no data when the level does
// not hold it, or it is before the series was born).
func (s *Store) cell(j, level int, c int64) (Point, error) {
	a := s.levels[level]
	nan := math.NaN()
	p := Point{Start: time.Unix(0, c*a.Factor*int64(s.step)), In: nan, Out: nan, InMax: nan, OutMax: nan}
	if !a.holds(c) || (c+1)*a.Factor-1 < s.born[j] {
		return p, nil
	}
	var buf [16]byte
	if _, err := a.f.ReadAt(buf[:a.cell], a.rowOff(int(c%int64(a.Rows)))+int64(j*a.cell)); err != nil {
		return p, err
	}
	f := func(o int) float64 { return float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[o:]))) }
	p.In, p.Out = f(0), f(4)
	p.InMax, p.OutMax = p.In, p.Out
	if a.cell == 16 {
		p.InMax, p.OutMax = f(8), f(12)
	}
	p.Known = !math.IsNaN(p.In) || !math.IsNaN(p.Out)
	return p, nil
}

// partial is slot j's point of step c of level, which holds base step nb
// and is not complete: consolidated, as a complete one is, from the finer
// level's steps up to nb (the last of them itself partial).
func (s *Store) partial(j, level int, c, nb int64) (Point, error) {
	a, fine := s.levels[level], s.levels[level-1]
	ratio := a.Factor / fine.Factor
	nan := math.NaN()
	p := Point{Start: time.Unix(0, c*a.Factor*int64(s.step)), In: nan, Out: nan, InMax: nan, OutMax: nan}
	var sum [2]float64
	var n [2]int
	for k := c * ratio; k < (c+1)*ratio && k*fine.Factor <= nb; k++ {
		var q Point
		var err error
		if level-1 > 0 && !fine.holds(k) && k == nb/fine.Factor {
			q, err = s.partial(j, level-1, k, nb)
		} else {
			q, err = s.cell(j, level-1, k)
		}
		if err != nil {
			return p, err
		}
		for d, v := range [2][2]float64{{q.In, q.InMax}, {q.Out, q.OutMax}} {
			if math.IsNaN(v[0]) {
				continue
			}
			sum[d] += v[0]
			n[d]++
			if top := []*float64{&p.InMax, &p.OutMax}[d]; math.IsNaN(*top) || v[1] > *top {
				*top = v[1]
			}
		}
	}
	if n[0] > 0 {
		p.In = sum[0] / float64(n[0])
	}
	if n[1] > 0 {
		p.Out = sum[1] / float64(n[1])
	}
	p.Known = n[0] > 0 || n[1] > 0
	return p, nil
}

// Names lists the known series whose names start with prefix, sorted.
func (s *Store) Names(prefix string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []string
	for name := range s.slot {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
