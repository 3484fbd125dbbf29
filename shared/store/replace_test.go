package store_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// TestReplace: keys given with their stored value are left alone (same
// revision), changed and new ones written, stored ones not given deleted,
// a key put by another writer after the read kept, keys outside the
// prefixes untouched; more keys than one transaction takes.
func TestReplace(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	s := store.New(env.KV, "r")
	// This process runs the embedded member: transactions as large as it
	// takes.
	if store.TxnOps() != store.EmbeddedTxnOps {
		t.Fatalf("TxnOps %d beside the embedded member, want %d", store.TxnOps(), store.EmbeddedTxnOps)
	}
	n := 3 * store.TxnOps()
	put := func(k, v string) int64 {
		t.Helper()
		resp, err := env.KV.Put(ctx, k, v)
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	key := func(i int) string { return s.Key("a", fmt.Sprintf("%04d", i)) }
	for i := 0; i < n; i++ {
		put(key(i), fmt.Sprint("v", i))
	}
	put(s.Key("b", "x"), "old")
	put(s.Key("c", "kept"), "outside the prefixes")
	unchangedRev := func(i int) int64 {
		g, err := env.KV.Get(ctx, key(i))
		if err != nil || len(g.Kvs) != 1 {
			t.Fatalf("get %d: %v %v", i, g, err)
		}
		return g.Kvs[0].ModRevision
	}
	before := unchangedRev(1)

	r := s.Replace(ctx, s.Key("a")+"/", s.Key("b")+"/")
	if err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if r.Stored() != n+1 {
		t.Fatalf("Stored() = %d, want %d", r.Stored(), n+1)
	}
	// Written by someone else after the read: not Replace's to delete.
	put(s.Key("b", "meanwhile"), "theirs")
	// Even keys kept, every third changed, odd ones (but 1) dropped, and
	// new ones past n.
	want := map[string]string{}
	for i := 0; i < n+200; i++ {
		v := fmt.Sprint("v", i)
		switch {
		case i < n && i%2 == 1 && i != 1:
			continue
		case i%3 == 0:
			v += "-changed"
		}
		want[key(i)] = v
		if err := r.Put(key(i), v); err != nil {
			t.Fatal(err)
		}
	}
	res, err := r.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Stored even keys and key 1 given; of them every third changed.
	var unchanged, written, deleted int
	for i := 0; i < n; i++ {
		_, given := want[key(i)]
		switch {
		case !given:
			deleted++
		case i%3 == 0:
			written++
		default:
			unchanged++
		}
	}
	written += 200
	deleted++ // b/x
	if res.Unchanged != unchanged || res.Written != written || res.Deleted != deleted || res.Revision == 0 {
		t.Errorf("result %+v; want unchanged %d, written %d, deleted %d", res, unchanged, written, deleted)
	}
	g, err := env.KV.Get(ctx, s.Key("a")+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range g.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	if len(got) != len(want) {
		t.Errorf("%d keys stored, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if after := unchangedRev(1); after != before {
		t.Errorf("an unchanged key was written again: revision %d, then %d", before, after)
	}
	for k, v := range map[string]string{s.Key("b", "meanwhile"): "theirs", s.Key("c", "kept"): "outside the prefixes", s.Key("b", "x"): ""} {
		g, err := env.KV.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		stored := ""
		if len(g.Kvs) == 1 {
			stored = string(g.Kvs[0].Value)
		}
		if stored != v {
			t.Errorf("%s = %q, want %q", k, stored, v)
		}
	}

	// The same again: nothing written, nothing deleted.
	r = s.Replace(ctx, s.Key("a")+"/")
	if err := r.Read(); err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if err := r.Put(k, v); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := r.Close(); err != nil || res != (store.ReplaceResult{Unchanged: len(want)}) {
		t.Errorf("the same again: %+v %v", res, err)
	}
}

// TestReplaceSame: pairs given to Want while Read runs; Same is true for
// exactly the stored pairs (and Close then writes nothing), false for one
// value changed, one key missing or one key more, and the Put pass after
// it writes the difference.
func TestReplaceSame(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	s := store.New(env.KV, "s")
	want := map[string]string{}
	for i := 0; i < 300; i++ {
		k, v := s.Key("a", fmt.Sprint(i)), fmt.Sprint("v", i)
		want[k] = v
		if _, err := env.KV.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	same := func(change func(map[string]string)) (*store.Replace, map[string]string, bool) {
		t.Helper()
		m := map[string]string{}
		for k, v := range want {
			m[k] = v
		}
		change(m)
		r := s.Replace(ctx, s.Key("a")+"/")
		done := make(chan error)
		go func() { done <- r.Read() }()
		for k, v := range m {
			r.Want(k, v)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return r, m, r.Same()
	}
	r, _, ok := same(func(map[string]string) {})
	if !ok {
		t.Fatal("Same() false for the stored pairs")
	}
	if res, err := r.Close(); err != nil || res != (store.ReplaceResult{Unchanged: 300}) {
		t.Errorf("Close after Same: %+v %v", res, err)
	}
	for name, change := range map[string]func(map[string]string){
		"a value changed": func(m map[string]string) { m[s.Key("a", "7")] = "other" },
		"a key missing":   func(m map[string]string) { delete(m, s.Key("a", "8")) },
		"a key more":      func(m map[string]string) { m[s.Key("a", "x")] = "new" },
	} {
		r, m, ok := same(change)
		if ok {
			t.Errorf("%s: Same() true", name)
			r.Abort()
			continue
		}
		for k, v := range m {
			if err := r.Put(k, v); err != nil {
				t.Fatal(err)
			}
		}
		res, err := r.Close()
		if err != nil || res.Written+res.Deleted != 1 {
			t.Errorf("%s: %+v %v", name, res, err)
		}
		want = m
	}
	// Abort writes nothing queued.
	r = s.Replace(ctx, s.Key("a")+"/")
	if err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if err := r.Put(s.Key("a", "aborted"), "x"); err != nil {
		t.Fatal(err)
	}
	r.Abort()
	if g, err := env.KV.Get(ctx, s.Key("a", "aborted")); err != nil || len(g.Kvs) != 0 {
		t.Errorf("written after Abort: %v %v", g, err)
	}
}

// TestReplaceFenced: through a fenced store whose lock is gone nothing is
// written, and Close says so.
func TestReplaceFenced(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	l, err := store.TryLock(ctx, env.KV, "replace")
	if err != nil {
		t.Fatal(err)
	}
	s := store.New(env.KV, "f").Fenced(l)
	r := s.Replace(ctx, s.Key("a")+"/")
	if err := r.Read(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	_ = r.Put(s.Key("a", "1"), "x")
	if _, err := r.Close(); err == nil {
		t.Fatal("Close after the lock was lost: no error")
	}
	if g, err := env.KV.Get(ctx, s.Key("a", "1")); err != nil || len(g.Kvs) != 0 {
		t.Errorf("written without the lock: %v %v", g, err)
	}
}

// TestReplaceSync: a document refused on its first pass writes nothing;
// the same document as stored is read once and writes nothing; another
// is read twice and written, the keys it leaves out deleted. Under
// prefixes holding nothing, the first pass only checks (put is nil): a
// document refused there still writes nothing, another is written whole,
// and an empty one writes nothing.
func TestReplaceSync(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	s := store.New(env.KV, "sync")
	prefix := s.Key("a") + "/"
	doc := func(pairs ...string) (func() (io.ReadCloser, error), *int) {
		opened := 0
		return func() (io.ReadCloser, error) {
			opened++
			return io.NopCloser(strings.NewReader(strings.Join(pairs, "\n"))), nil
		}, &opened
	}
	checkOnly := 0 // first passes given no put
	each := func(refuse string) func(io.Reader, int, func(k, v string) error) error {
		return func(r io.Reader, pass int, put func(k, v string) error) error {
			if put == nil {
				if pass != 1 {
					t.Errorf("no put on pass %d", pass)
				}
				checkOnly++
			}
			sc := bufio.NewScanner(r)
			for sc.Scan() {
				k, v, _ := strings.Cut(sc.Text(), "=")
				if k == refuse {
					return fmt.Errorf("%s refused", k)
				}
				if put == nil {
					continue
				}
				if err := put(prefix+k, v); err != nil {
					return err
				}
			}
			return sc.Err()
		}
	}
	fail := func(err error) error { return fmt.Errorf("wrapped: %w", err) }
	stored := func() map[string]string {
		g, err := env.KV.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]string{}
		for _, kv := range g.Kvs {
			m[strings.TrimPrefix(string(kv.Key), prefix)] = string(kv.Value)
		}
		return m
	}
	if _, err := env.KV.Put(ctx, prefix+"x", "1"); err != nil {
		t.Fatal(err)
	}

	open, _ := doc("y=2", "bad=3")
	if _, err := s.Replace(ctx, prefix).Sync(open, each("bad"), fail); err == nil || !strings.Contains(err.Error(), "bad refused") {
		t.Fatalf("refused document: %v", err)
	}
	if got := stored(); len(got) != 1 || got["x"] != "1" {
		t.Fatalf("after a refused document: %v", got)
	}

	open, opened := doc("x=1")
	res, err := s.Replace(ctx, prefix).Sync(open, each(""), fail)
	if err != nil || *opened != 1 || res.Written != 0 || res.Deleted != 0 || res.Unchanged != 1 || res.Revision != 0 {
		t.Fatalf("same document: opened %d, %+v, %v", *opened, res, err)
	}

	open, opened = doc("y=2", "z=3")
	res, err = s.Replace(ctx, prefix).Sync(open, each(""), fail)
	if err != nil || *opened != 2 || res.Written != 2 || res.Deleted != 1 || res.Revision == 0 {
		t.Fatalf("other document: opened %d, %+v, %v", *opened, res, err)
	}
	if got := stored(); len(got) != 2 || got["y"] != "2" || got["z"] != "3" {
		t.Fatalf("after another document: %v", got)
	}
	if checkOnly != 0 {
		t.Fatalf("%d first passes without put while keys were stored", checkOnly)
	}

	// Nothing stored under the prefixes (two of them, both empty).
	empty, other := s.Key("e")+"/", s.Key("f")+"/"
	prefix = empty
	open, opened = doc("p=1", "bad=2")
	if _, err := s.Replace(ctx, empty, other).Sync(open, each("bad"), fail); err == nil || !strings.Contains(err.Error(), "bad refused") || *opened != 1 || checkOnly != 1 {
		t.Fatalf("refused document into nothing: opened %d, check-only passes %d, %v", *opened, checkOnly, err)
	}
	if got := stored(); len(got) != 0 {
		t.Fatalf("a refused document into nothing wrote %v", got)
	}
	open, opened = doc("p=1", "q=2")
	res, err = s.Replace(ctx, empty, other).Sync(open, each(""), fail)
	if err != nil || *opened != 2 || checkOnly != 2 || res.Written != 2 || res.Deleted != 0 || res.Unchanged != 0 || res.Revision == 0 {
		t.Fatalf("document into nothing: opened %d, check-only passes %d, %+v, %v", *opened, checkOnly, res, err)
	}
	if got := stored(); len(got) != 2 || got["p"] != "1" || got["q"] != "2" {
		t.Fatalf("after a document into nothing: %v", got)
	}
	prefix = other
	open, opened = doc()
	res, err = s.Replace(ctx, other).Sync(open, each(""), fail)
	if err != nil || checkOnly != 3 || res.Written+res.Deleted+res.Unchanged != 0 || res.Revision != 0 || len(stored()) != 0 {
		t.Fatalf("empty document into nothing: opened %d, %+v, %v, %v", *opened, res, err, stored())
	}
}
