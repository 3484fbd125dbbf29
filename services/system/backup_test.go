package system_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/services/system"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// get fetches a raw answer.
func (r *rig) get(path string) (*http.Response, []byte) {
	r.t.Helper()
	req, _ := http.NewRequest("GET", r.url+path, nil)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// entries lists an archive's files with their contents.
func entries(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = b
	}
}

func routes(t *testing.T, r *rig) string {
	return testenv.Run(t, r.ns, "ip", "route", "show", "proto", "213")
}

func names(t *testing.T, r *rig) string {
	t.Helper()
	st, m := r.do("GET", "/plans", nil)
	if st != 200 {
		t.Fatalf("plans: %d %v", st, m)
	}
	var out []string
	for _, p := range m["plans"].([]any) {
		out = append(out, p.(map[string]any)["name"].(string))
	}
	return strings.Join(out, ",")
}

// TestBackupRestore: plans and a route configured; GET /backup; the
// configuration changed; POST /restore brings the archive's back, in etcd
// and in the kernel; the undo_file brings the changed one back again.
func TestBackupRestore(t *testing.T) {
	r := newRig(t, true)
	plan(t, r, "gold", 500)
	plan(t, r, "silver", 100)
	if st, m := r.do("POST", "/routes", map[string]any{"prefix": "10.50.0.0/16", "via": "192.0.2.254", "comment": "pop"}); st != 201 {
		t.Fatalf("route: %d %v", st, m)
	}
	before := routes(t, r)
	if !strings.Contains(before, "10.50.0.0/16 via 192.0.2.254") {
		t.Fatalf("kernel: %s", before)
	}

	resp, archive := r.get("/backup")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/gzip" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), `filename="routerd-backup-`) {
		t.Fatalf("backup: %d %v %s", resp.StatusCode, resp.Header, archive)
	}
	files := entries(t, archive)
	if !strings.Contains(string(files["etc/plans.json"]), `"name": "silver"`) || !strings.Contains(string(files["etc/routes.json"]), "10.50.0.0/16") ||
		len(files["data/etcd.snapshot"]) < 1000 {
		t.Fatalf("archive holds %v", keys(files))
	}
	var man map[string]any
	if err := json.Unmarshal(files["data/manifest.json"], &man); err != nil || man["revision"].(float64) < 1 || man["documents"].(float64) != 3 {
		t.Fatalf("manifest %s", files["data/manifest.json"])
	}
	path := filepath.Join(t.TempDir(), "b.tar.gz")
	os.WriteFile(path, archive, 0o600)

	// Change everything.
	r.do("DELETE", "/plans/silver", nil)
	plan(t, r, "bronze", 10)
	if st, m := r.do("DELETE", "/routes", map[string]any{"prefix": "10.50.0.0/16"}); st != 200 {
		t.Fatalf("route delete: %d %v", st, m)
	}
	if st, m := r.do("POST", "/routes", map[string]any{"prefix": "10.60.0.0/16", "dev": "r0"}); st != 201 {
		t.Fatalf("route: %d %v", st, m)
	}
	changed := routes(t, r)

	st, m := r.do("POST", "/restore", map[string]any{"file": path})
	if st != 200 || m["undo_version"].(float64) != 1 || !sameSet(strs(m["documents"]), "etc/plans.json", "etc/routes.json", "etc/vlans.json") {
		t.Fatalf("restore: %d %v", st, m)
	}
	if got := names(t, r); got != "gold,silver" {
		t.Errorf("plans after restore: %s", got)
	}
	if got := routes(t, r); got != before {
		t.Errorf("kernel routes after restore:\n%s\nwant\n%s", got, before)
	}
	// The undo version is the changed configuration, auto, by the caller.
	v := r.expect(200, "GET", "config-versions", nil, nil)["versions"].([]any)[0].(map[string]any)
	if v["id"].(float64) != 1 || v["auto"] != true {
		t.Errorf("undo version %v", v)
	}
	st, m = r.do("POST", "/restore", map[string]any{"file": m["undo_file"]})
	if st != 200 {
		t.Fatalf("undo: %d %v", st, m)
	}
	if got := names(t, r); got != "bronze,gold" {
		t.Errorf("plans after undo: %s", got)
	}
	if got := routes(t, r); got != changed {
		t.Errorf("kernel routes after undo:\n%s\nwant\n%s", got, changed)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// archiveOf builds a tar.gz of the given entries (name -> content; a name
// ending in @link is a symlink).
func archiveOf(t *testing.T, files map[string]string) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, c := range files {
		h := &tar.Header{Name: name, Mode: 0o600, Size: int64(len(c)), Typeflag: tar.TypeReg}
		if strings.HasSuffix(name, "@link") {
			h = &tar.Header{Name: strings.TrimSuffix(name, "@link"), Linkname: c, Typeflag: tar.TypeSymlink}
		}
		tw.WriteHeader(h)
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(c))
		}
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "a.tar.gz")
	os.WriteFile(p, buf.Bytes(), 0o600)
	return p
}

// TestRestoreRefused: every refusal of the archive is a 400 naming file
// and changes nothing (no undo version is saved); a document no service
// takes, or one its owner refuses, is a 500 with undo_version and next,
// and what the other owners took is brought back (rolled_back).
func TestRestoreRefused(t *testing.T) {
	r := newRig(t, false)
	plan(t, r, "gold", 500)
	notgz := filepath.Join(t.TempDir(), "x.tar.gz")
	os.WriteFile(notgz, []byte("not gzip"), 0o600)
	big := filepath.Join(t.TempDir(), "big.tar.gz")
	f, _ := os.Create(big)
	f.Truncate(300 << 20) // sparse
	f.Close()
	good := `{"plans": []}`
	for name, file := range map[string]string{
		"missing":  filepath.Join(t.TempDir(), "none.tar.gz"),
		"not gz":   notgz,
		"too big":  big,
		"dotdot":   archiveOf(t, map[string]string{"etc/plans.json": good, "etc/../../x": "x"}),
		"absolute": archiveOf(t, map[string]string{"/etc/passwd": "x", "etc/plans.json": good}),
		"other":    archiveOf(t, map[string]string{"etc/plans.json": good, "bin/sh": "x"}),
		"symlink":  archiveOf(t, map[string]string{"etc/plans.json@link": "/etc/shadow"}),
		"empty":    archiveOf(t, map[string]string{"data/x": "x"}),
		"dir":      t.TempDir(),
	} {
		st, m := r.do("POST", "/restore", map[string]any{"file": file})
		if st != 400 || m["field"] != "file" {
			t.Errorf("%s: %d %v", name, st, m)
		}
	}
	if st, m := r.do("POST", "/restore", map[string]any{}); st != 400 || m["field"] != "file" {
		t.Errorf("no file: %d %v", st, m)
	}
	if v := r.expect(200, "GET", "config-versions", nil, nil); v["count"].(float64) != 0 {
		t.Errorf("a refused restore saved a version: %v", v)
	}

	// A document its owner refuses: 500, undo_version, nothing of plans changed.
	st, m := r.do("POST", "/restore", map[string]any{"file": archiveOf(t, map[string]string{"etc/plans.json": "{broken"})})
	if st != 500 || m["undo_version"].(float64) != 1 || m["rolled_back"] != true || m["next"] == nil || !strings.Contains(m["detail"].(string), "etc/plans.json") {
		t.Errorf("broken document: %d %v", st, m)
	}
	if got := names(t, r); got != "gold" {
		t.Errorf("plans after a refused document: %s", got)
	}
	// A document nobody takes.
	st, m = r.do("POST", "/restore", map[string]any{"file": archiveOf(t, map[string]string{"etc/plans.json": good, "etc/unknown.json": "{}"})})
	if st != 500 || m["undo_version"].(float64) != 2 || m["rolled_back"] != true || strs(m["not_restored"])[0] != "etc/unknown.json" {
		t.Errorf("unknown document: %d %v", st, m)
	}
	// All or nothing: the plans the archive emptied are back.
	if got := names(t, r); got != "gold" {
		t.Errorf("plans after a restore that failed half way: %s", got)
	}
}

// TestBackupLarge: an archive larger than one bus message (8 MiB) reaches
// the client whole, streamed through the object store, which keeps
// nothing of it afterwards.
func TestBackupLarge(t *testing.T) {
	r := newRig(t, false)
	plan(t, r, "gold", 500)
	junk := make([]byte, 1<<20)
	for i := 0; i < 12; i++ {
		rand.Read(junk)
		if _, err := r.env.KV.Put(context.Background(), fmt.Sprintf("/router/test/junk/%d", i), string(junk)); err != nil {
			t.Fatal(err)
		}
	}
	resp, archive := r.get("/backup")
	if resp.StatusCode != 200 || len(archive) < 12<<20 || resp.Header.Get("X-Router-Archive-Object") != "" ||
		resp.Header.Get("Content-Length") != fmt.Sprint(len(archive)) {
		t.Fatalf("backup: %d, %d bytes, %v", resp.StatusCode, len(archive), resp.Header)
	}
	files := entries(t, archive)
	if len(files["data/etcd.snapshot"]) < 12<<20 || !strings.Contains(string(files["etc/plans.json"]), "gold") {
		t.Fatalf("archive holds %v", keys(files))
	}
	js, _ := jetstream.New(r.env.NC)
	obs, err := js.ObjectStore(context.Background(), api.ArchiveBucket)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if l, _ := obs.List(context.Background()); len(l) != 0 {
			return fmt.Errorf("object store keeps %d objects", len(l))
		}
		return nil
	})
}

// sameSet reports whether got holds exactly want, in any order.
func sameSet(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	seen := map[string]bool{}
	for _, g := range got {
		seen[g] = true
	}
	for _, w := range want {
		if !seen[w] {
			return false
		}
	}
	return true
}

// meeting is where the fake owners' imports wait for each other: met is
// closed once two are in flight at once (a new one for each round).
type meeting struct {
	mu     sync.Mutex
	in     int
	met    chan struct{}
	closed bool
}

// arrive says whether another import came beside this one within 5 s.
func (m *meeting) arrive() bool {
	m.mu.Lock()
	if m.in == 0 {
		m.met, m.closed = make(chan struct{}), false
	}
	m.in++
	met := m.met
	if m.in >= 2 && !m.closed {
		close(met)
		m.closed = true
	}
	m.mu.Unlock()
	select {
	case <-met:
		return true
	case <-time.After(5 * time.Second):
		return false
	}
}

func (m *meeting) leave() {
	m.mu.Lock()
	m.in--
	m.mu.Unlock()
}

// fakeOwner owns etc/<name>.json on the bus. Its import notes the restore
// it is part of and waits, up to 5 s, for another fake owner's import to
// be in flight beside it, refusing (a message) when none came or when the
// document holds "refuse".
type fakeOwner struct {
	name string
	op   api.ConfigOwner
	meet *meeting
	mu   sync.Mutex
	seen []string // ConfigDocuments.Restore of each import
}

func newFakeOwner(name string, beside bool, meet *meeting) *fakeOwner {
	return &fakeOwner{name: name, meet: meet, op: api.ConfigOwner{Service: name, BesidePrevious: beside,
		Export: api.Define[api.None, api.ConfigDocuments](api.Meta{Service: name, Name: "config.export", Read: true, Timeout: 10 * time.Second}),
		Import: api.Define[api.ConfigDocuments, api.ConfigImported](api.Meta{Service: name, Name: "config.import", Timeout: 10 * time.Second}),
	}}
}

func (f *fakeOwner) path() string { return "etc/" + f.name + ".json" }

func (f *fakeOwner) run(ctx context.Context, r *rig) {
	go bus.Run(ctx, r.env.NC, bus.ServiceConfig{Name: f.name, Version: "0.0.0", Log: testenv.Log(r.t), Endpoints: []bus.Endpoint{
		bus.Bind(f.op.Export, func(context.Context, *api.None) (*api.ConfigDocuments, error) {
			return &api.ConfigDocuments{Documents: map[string]string{f.path(): "{}\n"}}, nil
		}),
		bus.Bind(f.op.Import, func(_ context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
			f.mu.Lock()
			f.seen = append(f.seen, in.Restore)
			f.mu.Unlock()
			both := f.meet.arrive()
			defer f.meet.leave()
			out := &api.ConfigImported{Documents: []string{f.path()}}
			switch {
			case !both:
				out.Message = f.name + " imported alone"
			case strings.Contains(in.Documents[f.path()], "refuse"):
				out.Message = f.name + " refused by the test"
			}
			return out, nil
		}),
	}})
}

func (f *fakeOwner) restores() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// TestRestoreOwnersBeside: owners marked BesidePrevious import at the same
// time as the one before them (each fake owner refuses unless the other's
// import is in flight beside it), every import of one restore carries
// the same restore id, and the config.restored event with that id ends
// it: ok after a restore brought in, not ok after one rolled back (whose
// rollback imports carry the id too).
func TestRestoreOwnersBeside(t *testing.T) {
	meet := &meeting{}
	a, b := newFakeOwner("fakea", false, meet), newFakeOwner("fakeb", true, meet)
	r := newRig(t, false, func(d *system.Deps) { d.Owners = append(d.Owners, a.op, b.op) })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a.run(ctx, r)
	b.run(ctx, r)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, r.env.NC, a.name, b.name); missing != nil {
		t.Fatalf("not up: %v", missing)
	}
	ends := make(chan event.RestoreEnd, 4)
	sub, err := r.env.NC.Subscribe(event.Subject("system", event.ConfigRestored), func(m *nats.Msg) {
		var ev event.Event
		var end event.RestoreEnd
		if json.Unmarshal(m.Data, &ev) == nil && json.Unmarshal(ev.Data, &end) == nil {
			ends <- end
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	end := func() event.RestoreEnd {
		t.Helper()
		select {
		case e := <-ends:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no config.restored event")
		}
		return event.RestoreEnd{}
	}

	st, m := r.do("POST", "/restore", map[string]any{"file": archiveOf(t, map[string]string{
		"etc/plans.json": `{"plans": []}`, a.path(): "{}", b.path(): "{}"})})
	if st != 200 || !sameSet(strs(m["documents"]), "etc/plans.json", a.path(), b.path()) {
		t.Fatalf("restore: %d %v", st, m)
	}
	e := end()
	if ra, rb := a.restores(), b.restores(); len(ra) != 1 || len(rb) != 1 || ra[0] == "" || ra[0] != rb[0] || e.Restore != ra[0] || !e.OK {
		t.Fatalf("restore ids: %v %v, event %+v", ra, rb, e)
	}

	st, m = r.do("POST", "/restore", map[string]any{"file": archiveOf(t, map[string]string{
		"etc/plans.json": `{"plans": []}`, a.path(): "{}", b.path(): `{"refuse": true}`})})
	if st != 500 || m["rolled_back"] != true || !strings.Contains(fmt.Sprint(m["detail"]), "fakeb refused by the test") {
		t.Fatalf("refused restore: %d %v", st, m)
	}
	e = end()
	ra, rb := a.restores(), b.restores()
	if len(ra) != 3 || len(rb) != 3 || ra[1] == ra[0] || ra[1] != ra[2] || rb[1] != ra[1] || rb[2] != ra[1] || e.Restore != ra[1] || e.OK {
		t.Fatalf("restore ids of the refused restore and its rollback: %v %v, event %+v", ra, rb, e)
	}
}

// TestBackupChunks: the archive is put in the object store in whole
// chunks of 128 KiB (the last one shorter), not one per write of gzip
// (a few hundred bytes each); the object a backup leaves for the gateway
// is read here, without one.
func TestBackupChunks(t *testing.T) {
	r := newRig(t, false)
	plan(t, r, "gold", 500)
	junk := make([]byte, 1<<20)
	for i := 0; i < 2; i++ {
		rand.Read(junk) // incompressible: a snapshot of 2 MiB and more
		if _, err := r.env.KV.Put(context.Background(), fmt.Sprintf("/router/test/junk/%d", i), string(junk)); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := bus.CallOp(r.ctx, r.env.NC, api.BackupGet.Meta, &pb.Request{})
	if err != nil || rep.Status != 200 {
		t.Fatalf("backup: %+v %v", rep, err)
	}
	bucket, name, _ := strings.Cut(rep.Headers[api.ArchiveObjectHeader], "/")
	js, _ := jetstream.New(r.env.NC)
	obs, err := js.ObjectStore(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := obs.GetInfo(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 128 << 10
	if want := (info.Size + chunk - 1) / chunk; info.Size < 2<<20 || uint64(info.Chunks) != want {
		t.Errorf("archive of %d bytes in %d chunks, want %d", info.Size, info.Chunks, want)
	}
	if err := obs.Delete(context.Background(), name); err != nil {
		t.Fatal(err)
	}
}
