// Package versions keeps the saved configuration versions of the system
// service in etcd, under /router/system/ (the system service's own prefix):
//
//	versions/<id, 10 digits>   the version record and its documents' digests
//	blobs/<sha256>/<n, 4 digits> one document's content, gzip-compressed and
//	                           cut into pieces of at most blobChunk bytes,
//	                           shared by every version holding the same
//	                           content
//
// Documents are stored once per distinct content, so a thousand versions of
// an unchanged configuration cost one copy. A document of 100,000 clients
// (tens of megabytes) is larger than one etcd request may be: compressed
// and cut, it is a few keys of a megabyte. A version's blobs are written
// before its record, so a record never names a missing blob; a blob's
// first piece is written after the others and marks it whole.
// Blobs of the first releases, one uncompressed key blobs/<sha256>, are
// still read.
package versions

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/services/system/confdoc"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/store"
)

// TimeLayout is how saved_at is written.
const TimeLayout = "2006-01-02 15:04:05"

// File is one document of a stored version.
type File struct {
	Path   string `json:"path"`
	Bytes  int    `json:"bytes"`
	Digest string `json:"digest"`
}

// Record is a stored version: the API's fields and the documents.
type Record struct {
	api.ConfigVersion
	Documents []File `json:"documents"`
}

// Store keeps the versions.
type Store struct {
	st  *store.Store
	now func() time.Time
}

// New keeps versions in st (the system service's store).
func New(st *store.Store, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{st: st, now: now}
}

func (s *Store) versionKey(id int64) string { return s.st.Key("versions", fmt.Sprintf("%010d", id)) }
func (s *Store) blobKey(d string) string    { return s.st.Key("blobs", d) }

// Save stores docs as a new version and returns its record. by is who
// saved it; auto marks a version the router saved itself.
func (s *Store) Save(ctx context.Context, docs confdoc.Docs, by, comment string, auto bool) (*Record, error) {
	return s.SaveSources(ctx, confdoc.TextSources(docs), by, comment, auto)
}

// SaveSources is Save of documents read as streams: each is read twice
// (its digest, then its blob when not stored yet), never held whole.
func (s *Store) SaveSources(ctx context.Context, srcs []confdoc.Source, by, comment string, auto bool) (*Record, error) {
	srcs = append([]confdoc.Source(nil), srcs...)
	confdoc.SortSources(srcs)
	// The digests first: the set's (as confdoc.Digest) and each file's.
	all := sha256.New()
	files := make([]File, 0, len(srcs))
	var total int64
	for _, src := range srcs {
		io.WriteString(all, src.Path)
		all.Write([]byte{0})
		fh := sha256.New()
		n, err := copyFrom(src, io.MultiWriter(fh, all), src.Path)
		if err != nil {
			return nil, err
		}
		all.Write([]byte{0})
		files = append(files, File{Path: src.Path, Bytes: int(n), Digest: hex.EncodeToString(fh.Sum(nil))})
		total += n
	}
	// Blobs next, each piece a request of its own (etcd bounds the size
	// of one request), skipping contents already stored.
	for i, src := range srcs {
		if err := s.putBlob(ctx, files[i].Digest, src); err != nil {
			return nil, fmt.Errorf("versions: storing %s: %w", src.Path, err)
		}
	}
	digest := hex.EncodeToString(all.Sum(nil))
	for attempt := 0; attempt < 10; attempt++ {
		last, err := s.latestID(ctx)
		if err != nil {
			return nil, err
		}
		rec := &Record{ConfigVersion: api.ConfigVersion{
			ID: last + 1, SavedAt: s.now().Format(TimeLayout), SavedBy: by, Comment: comment, Auto: auto,
			Files: len(files), Bytes: total, Digest: digest,
		}, Documents: files}
		_, err = s.st.Txn().IfAbsent(s.versionKey(rec.ID)).Put(s.versionKey(rec.ID), rec).Commit(ctx)
		if errors.Is(err, store.ErrConflict) {
			continue // another save took the number
		}
		if err != nil {
			return nil, fmt.Errorf("versions: storing version %d: %w", rec.ID, err)
		}
		return rec, nil
	}
	return nil, apierr.Conflict("too many concurrent saves; try again")
}

// copyFrom copies one source's content to w.
func copyFrom(src confdoc.Source, w io.Writer, path string) (int64, error) {
	r, err := src.Open()
	if err != nil {
		return 0, fmt.Errorf("versions: reading %s: %w", path, err)
	}
	defer r.Close()
	n, err := io.Copy(w, r)
	if err != nil {
		return 0, fmt.Errorf("versions: reading %s: %w", path, err)
	}
	return n, nil
}

func (s *Store) latestID(ctx context.Context) (int64, error) {
	resp, err := s.st.Client().Get(ctx, s.st.Key("versions")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return 0, fmt.Errorf("versions: reading: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return 0, nil
	}
	k := string(resp.Kvs[0].Key)
	return strconv.ParseInt(k[strings.LastIndex(k, "/")+1:], 10, 64)
}

// Latest is the newest version, nil when none is saved.
func (s *Store) Latest(ctx context.Context) (*Record, error) {
	l, err := s.List(ctx, 1)
	if err != nil || len(l) == 0 {
		return nil, err
	}
	return &l[0], nil
}

// List returns the n newest versions, newest first. A record that does
// not parse is a *store.BrokenError.
func (s *Store) List(ctx context.Context, n int) ([]Record, error) {
	resp, err := s.st.Client().Get(ctx, s.st.Key("versions")+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(n)))
	if err != nil {
		return nil, fmt.Errorf("versions: reading: %w", err)
	}
	out := make([]Record, 0, len(resp.Kvs))
	var broken []string
	for _, kv := range resp.Kvs {
		var r Record
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			broken = append(broken, string(kv.Key))
			continue
		}
		out = append(out, r)
	}
	if len(broken) > 0 {
		return nil, &store.BrokenError{Keys: broken}
	}
	return out, nil
}

// Get returns one version's record; 404 when there is none.
func (s *Store) Get(ctx context.Context, id int64) (*Record, error) {
	r, _, err := store.Get[Record](ctx, s.st, s.versionKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return nil, apierr.NotFound("No such configuration version: %d", id)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// Documents returns a version's documents whole (config-status,
// config-diff: what compares texts).
func (s *Store) Documents(ctx context.Context, r *Record) (confdoc.Docs, error) {
	docs := make(confdoc.Docs, len(r.Documents))
	for _, f := range r.Documents {
		c, err := s.Document(ctx, f)
		if err != nil {
			return nil, err
		}
		docs[f.Path] = c
	}
	return docs, nil
}

// Sources are a version's documents as streams (an archive of it).
func (s *Store) Sources(ctx context.Context, r *Record) []confdoc.Source {
	out := make([]confdoc.Source, len(r.Documents))
	for i, f := range r.Documents {
		out[i] = confdoc.Source{Path: f.Path, Bytes: int64(f.Bytes), Open: func() (io.ReadCloser, error) { return s.Open(ctx, f) }}
	}
	return out
}

// blobChunk is the largest piece of a stored blob: well under etcd's
// default request limit of 1.5 MiB.
const blobChunk = 1 << 20

func (s *Store) chunkKey(d string, i int) string { return s.blobKey(d) + fmt.Sprintf("/%04d", i) }

// putBlob stores the content of src under its digest d, unless it is
// stored already. It is compressed as it is read and written a piece at
// a time; piece 0 is held back and written last, once the content read
// matched d, and marks the blob whole. Pieces left by a save that died
// half-way are written again by the next one (the same content: the key
// is its digest).
func (s *Store) putBlob(ctx context.Context, d string, src confdoc.Source) error {
	first := s.chunkKey(d, 0)
	if resp, err := s.st.Client().Get(ctx, first, clientv3.WithCountOnly()); err != nil {
		return err
	} else if resp.Count > 0 {
		return nil
	}
	r, err := src.Open()
	if err != nil {
		return err
	}
	defer r.Close()
	pw := &pieceWriter{ctx: ctx, s: s, d: d}
	zw, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(zw, h), r); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != d {
		return fmt.Errorf("the document changed while it was stored (digest %s, then %s)", d, got)
	}
	if err := pw.flush(); err != nil {
		return err
	}
	_, err = s.st.Client().Put(ctx, first, string(pw.first))
	return err
}

// pieceWriter cuts what is written into pieces of blobChunk bytes and
// stores each full one at once, piece 0 excepted (held for the end).
type pieceWriter struct {
	ctx   context.Context
	s     *Store
	d     string
	n     int // the piece being filled
	cur   []byte
	first []byte
}

func (w *pieceWriter) Write(p []byte) (int, error) {
	total := len(p)
	for len(p) > 0 {
		k := min(blobChunk-len(w.cur), len(p))
		w.cur = append(w.cur, p[:k]...)
		p = p[k:]
		if len(w.cur) == blobChunk {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return total, nil
}

// flush ends the piece being filled (also when short: the last one).
func (w *pieceWriter) flush() error {
	if w.n == 0 {
		w.first, w.cur = w.cur, nil
	} else if len(w.cur) > 0 {
		if _, err := w.s.st.Client().Put(w.ctx, w.s.chunkKey(w.d, w.n), string(w.cur)); err != nil {
			return err
		}
		w.cur = w.cur[:0]
	} else {
		return nil
	}
	w.n++
	return nil
}

// Document returns one document's content, checked against its digest.
func (s *Store) Document(ctx context.Context, f File) (string, error) {
	r, err := s.Open(ctx, f)
	if err != nil {
		return "", err
	}
	defer r.Close()
	var b strings.Builder
	b.Grow(f.Bytes)
	if _, err := io.Copy(&b, r); err != nil {
		return "", err
	}
	return b.String(), nil
}

// Open reads one document's content as a stream, a piece at a time,
// checked against its digest at its end (an error of Read, a
// *store.BrokenError, when it does not match or a piece is missing).
func (s *Store) Open(ctx context.Context, f File) (io.ReadCloser, error) {
	key := s.blobKey(f.Digest)
	resp, err := s.st.Client().Get(ctx, key, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return nil, fmt.Errorf("versions: reading %s: %w", f.Path, err)
	}
	broken := &store.BrokenError{Keys: []string{key}}
	if len(resp.Kvs) == 0 {
		return nil, broken
	}
	var src io.Reader
	if string(resp.Kvs[0].Key) == key { // a blob of the first releases: one key, not compressed
		g, err := s.st.Client().Get(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("versions: reading %s: %w", f.Path, err)
		}
		if len(g.Kvs) == 0 {
			return nil, broken
		}
		src = bytes.NewReader(g.Kvs[0].Value)
	} else {
		for i, kv := range resp.Kvs { // sorted by key: the pieces in order
			if string(kv.Key) != s.chunkKey(f.Digest, i) {
				return nil, &store.BrokenError{Keys: []string{string(kv.Key)}}
			}
		}
		zr, err := gzip.NewReader(&pieceReader{ctx: ctx, s: s, d: f.Digest, pieces: len(resp.Kvs)})
		if err != nil {
			return nil, broken
		}
		src = zr
	}
	return &checked{r: src, h: sha256.New(), want: f.Digest, broken: broken}, nil
}

// pieceReader reads a blob's pieces one after the other.
type pieceReader struct {
	ctx    context.Context
	s      *Store
	d      string
	pieces int
	next   int
	cur    []byte
}

func (r *pieceReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		if r.next == r.pieces {
			return 0, io.EOF
		}
		g, err := r.s.st.Client().Get(r.ctx, r.s.chunkKey(r.d, r.next))
		if err != nil {
			return 0, err
		}
		if len(g.Kvs) == 0 {
			return 0, &store.BrokenError{Keys: []string{r.s.chunkKey(r.d, r.next)}}
		}
		r.cur = g.Kvs[0].Value
		r.next++
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// checked passes a document through, and at its end fails unless it
// matched the digest.
type checked struct {
	r      io.Reader
	h      hash.Hash
	want   string
	broken error
}

func (c *checked) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	switch {
	case err == io.EOF && hex.EncodeToString(c.h.Sum(nil)) != c.want:
		return n, c.broken
	case err != nil && corrupt(err):
		return n, c.broken
	}
	return n, err
}

// corrupt reports an error of the content rather than of the store.
func corrupt(err error) bool {
	var ce flate.CorruptInputError
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ce)
}

func (c *checked) Close() error { return nil }
