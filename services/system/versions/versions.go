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
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// Blobs first, each in a transaction of its own (etcd bounds the size
	// of one request), skipping contents already stored.
	files := make([]File, 0, len(docs))
	for _, p := range confdoc.Paths(docs) {
		c := docs[p]
		f := File{Path: p, Bytes: len(c), Digest: confdoc.FileDigest(c)}
		files = append(files, f)
		if err := s.putBlob(ctx, f.Digest, c); err != nil {
			return nil, fmt.Errorf("versions: storing %s: %w", p, err)
		}
	}
	for attempt := 0; attempt < 10; attempt++ {
		last, err := s.latestID(ctx)
		if err != nil {
			return nil, err
		}
		rec := &Record{ConfigVersion: api.ConfigVersion{
			ID: last + 1, SavedAt: s.now().Format(TimeLayout), SavedBy: by, Comment: comment, Auto: auto,
			Files: len(files), Bytes: confdoc.Bytes(docs), Digest: confdoc.Digest(docs),
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

// Documents returns a version's documents.
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

// blobChunk is the largest piece of a stored blob: well under etcd's
// default request limit of 1.5 MiB.
const blobChunk = 1 << 20

func (s *Store) chunkKey(d string, i int) string { return s.blobKey(d) + fmt.Sprintf("/%04d", i) }

// putBlob stores content under its digest d, unless it is stored already.
func (s *Store) putBlob(ctx context.Context, d, content string) error {
	first := s.chunkKey(d, 0)
	if resp, err := s.st.Client().Get(ctx, first, clientv3.WithCountOnly()); err != nil {
		return err
	} else if resp.Count > 0 {
		return nil
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	if _, err := zw.Write([]byte(content)); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	z := buf.Bytes()
	pieces := max(1, (len(z)+blobChunk-1)/blobChunk)
	// Each piece is a request of its own (etcd bounds one request's size);
	// piece 0 goes last and marks the blob whole. Pieces left by a save
	// that died half-way are written again by the next one (the same
	// content: the key is its digest).
	for i := pieces - 1; i >= 0; i-- {
		if _, err := s.st.Client().Put(ctx, s.chunkKey(d, i), string(z[i*blobChunk:min((i+1)*blobChunk, len(z))])); err != nil {
			return err
		}
	}
	return nil
}

// Document returns one document's content, checked against its digest.
func (s *Store) Document(ctx context.Context, f File) (string, error) {
	key := s.blobKey(f.Digest)
	resp, err := s.st.Client().Get(ctx, key, clientv3.WithPrefix())
	if err != nil {
		return "", fmt.Errorf("versions: reading %s: %w", f.Path, err)
	}
	var content string
	pieces := resp.Kvs
	if len(pieces) > 0 && string(pieces[0].Key) == key {
		content = string(pieces[0].Value) // a blob of the first releases
		pieces = pieces[1:]
	}
	if len(pieces) > 0 {
		var z []byte
		for i, kv := range pieces { // sorted by key: the pieces in order
			if string(kv.Key) != s.chunkKey(f.Digest, i) {
				return "", &store.BrokenError{Keys: []string{string(kv.Key)}}
			}
			z = append(z, kv.Value...)
		}
		zr, err := gzip.NewReader(bytes.NewReader(z))
		if err != nil {
			return "", &store.BrokenError{Keys: []string{key}}
		}
		b, err := io.ReadAll(zr)
		if err != nil {
			return "", &store.BrokenError{Keys: []string{key}}
		}
		content = string(b)
	}
	if len(resp.Kvs) == 0 || confdoc.FileDigest(content) != f.Digest {
		return "", &store.BrokenError{Keys: []string{key}}
	}
	return content, nil
}
