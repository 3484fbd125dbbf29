package system

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/services/system/confdoc"
	"routerd.dev/services/system/versions"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/docobj"
	"routerd.dev/shared/version"
)

// Archive limits.
const (
	// MaxArchive bounds the archive POST /restore reads.
	MaxArchive = 256 << 20
	// MaxDocuments bounds the configuration documents it brings in, all
	// together. The large ones are not held in memory (they go to their
	// owners as objects of the document store, docobj); the bound keeps
	// an archive from filling the store. 100,000 MAC clients with their
	// reservations are about 60 MB of documents.
	MaxDocuments = 128 << 20
)

// Manifest is data/manifest.json in an archive.
type Manifest struct {
	Created       string `json:"created"`
	RouterVersion string `json:"router_version"`
	Revision      int64  `json:"revision" doc:"etcd revision of data/etcd.snapshot"`
	Documents     int    `json:"documents"`
	Digest        string `json:"digest" doc:"confdoc.Digest of etc/"`
}

// writeArchive writes a .tar.gz of the documents under etc/, each
// streamed from its source, and, when snapshot is not nil,
// data/etcd.snapshot and data/manifest.json (m with the documents' count
// and digest, computed as they pass).
func writeArchive(w io.Writer, docs []confdoc.Source, snapshot io.Reader, m Manifest) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	now := time.Now()
	file := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(data)), ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, dir := range []string{"etc/", "data/"} {
		if err := tw.WriteHeader(&tar.Header{Name: dir, Mode: 0o700, ModTime: now, Typeflag: tar.TypeDir}); err != nil {
			return err
		}
	}
	digest := sha256.New() // confdoc.Digest, as the documents pass
	for _, d := range docs {
		if err := tw.WriteHeader(&tar.Header{Name: d.Path, Mode: 0o600, Size: d.Bytes, ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		r, err := d.Open()
		if err != nil {
			return fmt.Errorf("%s: %w", d.Path, err)
		}
		io.WriteString(digest, d.Path)
		digest.Write([]byte{0})
		_, err = io.Copy(io.MultiWriter(tw, digest), r)
		r.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", d.Path, err)
		}
		digest.Write([]byte{0})
	}
	if snapshot != nil {
		// The snapshot's size is known only once read: spool it to a
		// temporary file rather than memory.
		tmp, err := os.CreateTemp("", "routerd-snapshot-")
		if err != nil {
			return err
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		n, err := io.Copy(tmp, snapshot)
		if err != nil {
			return fmt.Errorf("etcd snapshot: %w", err)
		}
		if _, err := tmp.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: "data/etcd.snapshot", Mode: 0o600, Size: n, ModTime: now, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tmp); err != nil {
			return err
		}
		m.Documents, m.Digest = len(docs), hex.EncodeToString(digest.Sum(nil))
		mj, _ := json.MarshalIndent(m, "", "    ")
		if err := file("data/manifest.json", append(mj, '\n')); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// backup answers GET /backup with the archive (a raw answer: not JSON).
func (s *Service) backup(ctx context.Context, _ *pb.Request) (int, any, error) {
	start := time.Now()
	set, err := s.collect(ctx)
	if err != nil {
		ae := apierr.From(err)
		if _, broken := ae.Fields["broken_data_files"]; broken || ae.Kind == apierr.KindUnavailable {
			return 0, nil, ae
		}
		return 0, nil, apierr.Internal(ae.Message, "backup failed: the configuration documents could not be gathered")
	}
	defer s.release(ctx, set)
	docs := s.sources(ctx, set)
	gathered := time.Since(start)
	// A revision read just before the snapshot: the snapshot is the whole
	// database at one revision (at least this one).
	rev := int64(0)
	if g, err := s.deps.KV.Get(ctx, "/router/system/", clientv3.WithCountOnly()); err == nil {
		rev = g.Header.Revision
	}
	snap, err := s.deps.KV.Snapshot(ctx)
	if err != nil {
		return 0, nil, apierr.Internal(err.Error(), "backup failed: etcd snapshot")
	}
	defer snap.Close()
	now := s.deps.Now()
	name := "routerd-backup-" + now.UTC().Format("20060102-150405") + ".tar.gz"
	obs, err := archiveStore(ctx, s.deps.NC)
	if err != nil {
		return 0, nil, apierr.Internal(err.Error(), "backup failed: the archive store of the bus is not available")
	}
	// The archive is written into a pipe and put in the object store in
	// chunks as it is made: never whole in memory, never one bus message.
	// Put makes a chunk of each read of the pipe, and gzip writes a few
	// hundred bytes at a time: unbuffered, an archive was thousands of
	// tiny chunks (one of 7.8 KB several; the gateway, reading them while
	// its client hung up, was left waiting for chunks its cancelled
	// subscription would never deliver, and routerd's shutdown with it:
	// e2e TestLabBackupRestore's flake). Buffered, each chunk is whole.
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, archiveChunk)
		err := writeArchive(bw, docs, snap, Manifest{Created: now.Format(time.RFC3339), RouterVersion: version.Version, Revision: rev})
		if err == nil {
			err = bw.Flush()
		}
		pw.CloseWithError(err)
	}()
	object := name + "." + api.OriginOf(ctx).RequestID
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: object, Opts: &jetstream.ObjectMetaOptions{ChunkSize: archiveChunk}}, pr)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return 0, nil, apierr.Internal(err.Error(), "backup failed")
	}
	s.deps.Log.Info("backup archive made", "object", object, "bytes", info.Size, "chunks", info.Chunks, "documents", len(docs), "revision", rev,
		"gathered_in", gathered.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return 200, bus.Raw{ContentType: "application/gzip", Headers: map[string]string{
		"Content-Disposition":   `attachment; filename="` + name + `"`,
		api.ArchiveObjectHeader: api.ArchiveBucket + "/" + object,
	}}, nil
}

// archiveChunk is the size of an archive's chunks in the object store
// (the object store's default).
const archiveChunk = 128 << 10

// archiveStore is the object store archives travel through; objects left
// behind (a gateway that died before fetching one) expire.
func archiveStore(ctx context.Context, nc *nats.Conn) (jetstream.ObjectStore, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: api.ArchiveBucket, Description: "backup archives on their way to the HTTP client",
		TTL: 30 * time.Minute, Storage: jetstream.FileStorage,
	})
}

// readArchive validates an archive on the router and brings its
// configuration documents (etc/*) into a set: each streamed from the
// archive, as text when small, else into an object of the document store
// (docobj.Render). Every failure of the archive is the caller's: a 400
// naming file, and nothing is left behind.
func (s *Service) readArchive(ctx context.Context, file string) (set docSet, err error) {
	bad := func(format string, a ...any) error { return apierr.Invalid("file", format, a...) }
	fi, err := os.Stat(file)
	switch {
	case err != nil:
		return set, bad("file %s not found on the router", file)
	case !fi.Mode().IsRegular():
		return set, bad("%s is not a regular file", file)
	case fi.Size() > MaxArchive:
		return set, bad("%s is %d bytes; at most %d", file, fi.Size(), MaxArchive)
	}
	f, err := os.Open(file)
	if err != nil {
		return set, bad("cannot open %s: %v", file, err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return set, bad("%s is not a valid tar.gz: %v", file, err)
	}
	set = docSet{text: confdoc.Docs{}, objs: map[string]api.ConfigObject{}}
	defer func() {
		if err != nil {
			s.release(ctx, set)
			set = docSet{}
		}
	}()
	tr := tar.NewReader(io.LimitReader(gz, 4*MaxArchive))
	var total int64
	entries := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return set, bad("%s is not a valid tar.gz: %v", file, err)
		}
		entries++
		name := h.Name
		clean := path.Clean(strings.TrimPrefix(name, "./"))
		if path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(name, "\\") {
			return set, bad("%s holds %q, a path outside its directory", file, name)
		}
		top, _, _ := strings.Cut(clean, "/")
		if top != "etc" && top != "data" {
			return set, bad("%s holds %q: an archive holds only etc/ and data/", file, name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return set, bad("%s holds %q, which is not a regular file (links are refused)", file, name)
		}
		if top != "etc" {
			continue
		}
		if _, dup := set.text[clean]; dup {
			return set, bad("%s holds %s twice", file, clean)
		}
		if _, dup := set.objs[clean]; dup {
			return set, bad("%s holds %s twice", file, clean)
		}
		if h.Size > MaxDocuments || total+h.Size > MaxDocuments {
			return set, bad("%s: the configuration documents exceed %d bytes", file, MaxDocuments)
		}
		total += h.Size
		var readErr error
		text, obj, err := docobj.Render(ctx, s.deps.NC, clean, func(w io.Writer) error {
			_, readErr = io.Copy(w, tr)
			return readErr
		})
		if readErr != nil {
			return set, bad("%s is not a valid tar.gz: %v", file, readErr)
		}
		if err != nil {
			return set, apierr.Internal(err.Error(), "restore failed: %s could not be put in the document store of the bus", clean)
		}
		if obj != nil {
			set.objs[clean] = *obj
		} else {
			set.text[clean] = text
		}
	}
	if entries == 0 {
		return set, bad("%s is an empty archive", file)
	}
	if len(set.text)+len(set.objs) == 0 {
		return set, bad("%s holds no configuration documents (etc/)", file)
	}
	return set, nil
}

// request is what every owner is sent to import set: the documents as
// text, and as objects those an owner streams (ConfigOwner.Streamed); an
// object of another path (a document past docobj.InlineMax that its owner
// takes as text) is read whole into the text, as the bus carried it
// before.
func (s *Service) request(ctx context.Context, set docSet) (*api.ConfigDocuments, error) {
	streamed := map[string]bool{}
	for _, o := range s.owners {
		for _, p := range o.Streamed {
			streamed[p] = true
		}
	}
	req := &api.ConfigDocuments{Documents: maps.Clone(set.text), Objects: map[string]api.ConfigObject{}}
	for p, o := range set.objs {
		if streamed[p] {
			req.Objects[p] = o
			continue
		}
		t, err := docobj.Text(ctx, s.deps.NC, o)
		if err != nil {
			return nil, err
		}
		req.Documents[p] = t
	}
	return req, nil
}

// importAll sends req to every owner in restore order, an owner marked
// BesidePrevious at the same time as the one before it (their imports in
// flight together, each answer awaited before the next group starts): the
// paths taken and the owners' failures, in the owners' order.
func (s *Service) importAll(ctx context.Context, req *api.ConfigDocuments) (map[string]bool, []string) {
	taken := map[string]bool{}
	var failures []string
	type result struct {
		res *api.ConfigImported
		err error
	}
	for from := 0; from < len(s.owners); {
		to := from + 1
		for to < len(s.owners) && s.owners[to].BesidePrevious {
			to++
		}
		group := s.owners[from:to]
		out := make([]result, len(group))
		var wg sync.WaitGroup
		for i, o := range group {
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				res, err := bus.Invoke(ctx, s.deps.NC, o.Import, req)
				s.deps.Log.Info("configuration imported", "service", o.Service, "took", time.Since(t0).Round(time.Millisecond), "beside", len(group)-1, "err", err)
				out[i] = result{res, err}
			}()
		}
		wg.Wait()
		for i, o := range group {
			res, err := out[i].res, out[i].err
			if err != nil {
				failures = append(failures, fmt.Sprintf("%s: %v", o.Service, err))
				continue
			}
			for _, p := range res.Documents {
				taken[p] = true
			}
			if res.Message != "" {
				failures = append(failures, fmt.Sprintf("%s: %s", o.Service, res.Message))
			}
		}
		from = to
	}
	return taken, failures
}

// restoreID names one restore in its owners' imports and in the
// config.restored event that ends it.
func restoreID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// restored publishes the end of restore id: the owners that held work
// for it (api.ConfigDocuments.Restore) do it now.
func (s *Service) restored(ctx context.Context, id string, ok bool) {
	o := api.OriginOf(ctx)
	bus.NewPublisher(s.deps.NC, Name, s.deps.Log).Publish(event.ConfigRestored,
		&pb.Request{Caller: o.Caller, By: o.By, RequestID: o.RequestID}, event.RestoreEnd{Restore: id, OK: ok})
}

// restore brings an archive's documents in through their owners.
func (s *Service) restore(ctx context.Context, in *api.RestoreRequest) (*api.RestoreAnswer, error) {
	start := time.Now()
	// The archive is unpacked while the owners render the running
	// configuration: neither needs the other.
	var docs docSet
	var docsErr error
	unpacked := make(chan time.Duration, 1)
	go func() {
		docs, docsErr = s.readArchive(ctx, in.File)
		unpacked <- time.Since(start)
	}()
	before, err := s.collect(ctx)
	unpackedIn := <-unpacked
	if docsErr != nil {
		if err == nil {
			s.release(ctx, before)
		}
		return nil, docsErr
	}
	defer s.release(ctx, docs)
	gathered := time.Since(start)
	var undo *versions.Record
	if err == nil {
		undo, err = s.versions.SaveSources(ctx, s.sources(ctx, before), savedBy(ctx), "before restore of "+filepath.Base(in.File), true)
		// Saved, the running documents' objects are not needed any more
		// (a rollback reads the undo version): deleted now, the bus's
		// store does not keep them (nor their blocks in its cache) through
		// the imports.
		s.release(ctx, before)
	}
	if err != nil {
		ae := apierr.From(err)
		return nil, ae.With("next", "nothing was changed: the running configuration could not be saved first; fix that, then restore again")
	}
	saved := time.Since(start)
	a := &api.RestoreAnswer{Documents: []string{}, UndoVersion: undo.ID}
	// The undo archive is written from the saved version's blobs (keys
	// of this service) while the owners import.
	undone := make(chan time.Duration, 1)
	go func() {
		var err error
		if a.UndoFile, err = s.writeUndo(ctx, undo.ID); err != nil {
			s.deps.Log.Warn("restore: undo archive not written", "version", undo.ID, "err", err)
		}
		undone <- time.Since(start)
	}()
	var taken map[string]bool
	var failures []string
	id := restoreID()
	// However it ends, the owners holding work for this restore are told.
	defer func() { s.restored(ctx, id, len(failures) == 0) }()
	req, err := s.request(ctx, docs)
	if err != nil {
		failures = append(failures, "the archive's documents could not be read back: "+err.Error())
	} else {
		req.Restore = id
		taken, failures = s.importAll(ctx, req)
	}
	imported := time.Since(start)
	undoneBy := <-undone
	var left []string
	for _, p := range docs.paths() {
		if taken[p] {
			a.Documents = append(a.Documents, p)
		} else {
			left = append(left, p)
		}
	}
	if len(left) > 0 && len(failures) == 0 {
		failures = append(failures, "no service takes "+strings.Join(left, ", "))
	}
	if len(failures) > 0 {
		// A restore is all or nothing: what some owners took is undone by
		// bringing the configuration before it back into every owner.
		var backErr []string
		bctx := context.WithoutCancel(ctx)
		back, err := s.versionSet(bctx, undo)
		var req *api.ConfigDocuments
		if err == nil {
			defer s.release(bctx, back)
			req, err = s.request(bctx, back)
		}
		if err != nil {
			backErr = append(backErr, err.Error())
		} else {
			req.Restore = id
			_, backErr = s.importAll(bctx, req)
		}
		next := fmt.Sprintf("nothing was changed: the configuration before the restore (version %d) was brought back", undo.ID)
		if len(backErr) > 0 {
			s.deps.Log.Error("restore failed and the configuration before it could not be brought back whole", "undo_version", undo.ID, "errors", backErr)
			next = fmt.Sprintf("the configuration before the restore is version %d, but bringing it back failed (%s)", undo.ID, strings.Join(backErr, "; "))
			if a.UndoFile != "" {
				next += fmt.Sprintf(": POST /restore with file=%s puts it back", a.UndoFile)
			}
		}
		return nil, apierr.Internal(strings.Join(failures, "; "), "not every configuration document could be brought in").
			With("undo_version", undo.ID).With("undo_file", a.UndoFile).With("documents", a.Documents).
			With("not_restored", left).With("rolled_back", len(backErr) == 0).With("next", next)
	}
	a.Message = fmt.Sprintf("Restored %d configuration documents", len(a.Documents))
	s.deps.Log.Info("restored", "documents", len(a.Documents), "undo_version", undo.ID,
		"unpacked_by", unpackedIn.Round(time.Millisecond), "gathered_by", gathered.Round(time.Millisecond),
		"saved_by", saved.Round(time.Millisecond), "imported_by", imported.Round(time.Millisecond),
		"undo_file_by", undoneBy.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	return a, nil
}

// versionSet is a saved version's documents as a set, each streamed from
// the version's blobs as text when small, else into an object
// (docobj.Render): how a failed restore brings the configuration before
// it back. The caller releases the set.
func (s *Service) versionSet(ctx context.Context, rec *versions.Record) (docSet, error) {
	set := docSet{text: confdoc.Docs{}, objs: map[string]api.ConfigObject{}}
	for _, src := range s.versions.Sources(ctx, rec) {
		text, obj, err := docobj.Render(ctx, s.deps.NC, src.Path, func(w io.Writer) error {
			r, err := src.Open()
			if err != nil {
				return err
			}
			defer r.Close()
			_, err = io.Copy(w, r)
			return err
		})
		if err != nil {
			s.release(ctx, set)
			return docSet{}, fmt.Errorf("version %d: %s: %w", rec.ID, src.Path, err)
		}
		if obj != nil {
			set.objs[src.Path] = *obj
		} else {
			set.text[src.Path] = text
		}
	}
	return set, nil
}

// writeUndo writes version id's documents as an archive under the state
// directory's backups/, for POST /restore to take back.
func (s *Service) writeUndo(ctx context.Context, id int64) (string, error) {
	if s.deps.StateDir == "" {
		return "", errors.New("no state directory")
	}
	rec, err := s.versions.Get(ctx, id)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(s.deps.StateDir, "backups")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	name := filepath.Join(dir, fmt.Sprintf("undo-version-%d.tar.gz", id))
	f, err := os.OpenFile(name+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return "", err
	}
	if err := writeArchive(f, s.versions.Sources(ctx, rec), nil, Manifest{}); err != nil {
		f.Close()
		os.Remove(name + ".tmp")
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return name, os.Rename(name+".tmp", name)
}
