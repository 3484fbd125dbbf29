package system

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/system/confdoc"
	"routerd.dev/services/system/versions"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/version"
)

// Archive limits.
const (
	// MaxArchive bounds the archive POST /restore reads.
	MaxArchive = 256 << 20
	// MaxDocuments bounds the configuration documents it brings in, all
	// together: they are held in memory and sent to their owners on the
	// bus (through its object store past one message). 100,000 MAC
	// clients with their reservations are about 40 MB of documents.
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

// writeArchive writes a .tar.gz of the documents under etc/ and, when
// snapshot is not nil, data/etcd.snapshot and data/manifest.json.
func writeArchive(w io.Writer, docs confdoc.Docs, snapshot io.Reader, m Manifest) error {
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
	for _, p := range confdoc.Paths(docs) {
		if err := file(p, []byte(docs[p])); err != nil {
			return err
		}
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
	docs, err := s.running(ctx)
	if err != nil {
		ae := apierr.From(err)
		if _, broken := ae.Fields["broken_data_files"]; broken || ae.Kind == apierr.KindUnavailable {
			return 0, nil, ae
		}
		return 0, nil, apierr.Internal(ae.Message, "backup failed: the configuration documents could not be gathered")
	}
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
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(writeArchive(pw, docs, snap, Manifest{Created: now.Format(time.RFC3339), RouterVersion: version.Version,
			Revision: rev, Documents: len(docs), Digest: confdoc.Digest(docs)}))
	}()
	object := name + "." + api.OriginOf(ctx).RequestID
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: object}, pr)
	pr.CloseWithError(io.ErrClosedPipe)
	if err != nil {
		return 0, nil, apierr.Internal(err.Error(), "backup failed")
	}
	s.deps.Log.Info("backup archive made", "object", object, "bytes", info.Size, "documents", len(docs), "revision", rev)
	return 200, bus.Raw{ContentType: "application/gzip", Headers: map[string]string{
		"Content-Disposition":   `attachment; filename="` + name + `"`,
		api.ArchiveObjectHeader: api.ArchiveBucket + "/" + object,
	}}, nil
}

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

// readArchive validates an archive on the router and returns its
// configuration documents (etc/*). Every failure is the caller's: a 400
// naming file.
func readArchive(file string) (confdoc.Docs, error) {
	bad := func(format string, a ...any) error { return apierr.Invalid("file", format, a...) }
	fi, err := os.Stat(file)
	switch {
	case err != nil:
		return nil, bad("file %s not found on the router", file)
	case !fi.Mode().IsRegular():
		return nil, bad("%s is not a regular file", file)
	case fi.Size() > MaxArchive:
		return nil, bad("%s is %d bytes; at most %d", file, fi.Size(), MaxArchive)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, bad("cannot open %s: %v", file, err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, bad("%s is not a valid tar.gz: %v", file, err)
	}
	tr := tar.NewReader(io.LimitReader(gz, 4*MaxArchive))
	docs := confdoc.Docs{}
	total := 0
	entries := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, bad("%s is not a valid tar.gz: %v", file, err)
		}
		entries++
		name := h.Name
		clean := path.Clean(strings.TrimPrefix(name, "./"))
		if path.IsAbs(name) || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(name, "\\") {
			return nil, bad("%s holds %q, a path outside its directory", file, name)
		}
		top, _, _ := strings.Cut(clean, "/")
		if top != "etc" && top != "data" {
			return nil, bad("%s holds %q: an archive holds only etc/ and data/", file, name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			continue
		case tar.TypeReg:
		default:
			return nil, bad("%s holds %q, which is not a regular file (links are refused)", file, name)
		}
		if top != "etc" {
			continue
		}
		if h.Size > MaxDocuments || total+int(h.Size) > MaxDocuments {
			return nil, bad("%s: the configuration documents exceed %d bytes", file, MaxDocuments)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, bad("%s is not a valid tar.gz: %v", file, err)
		}
		total += len(b)
		docs[clean] = string(b)
	}
	if entries == 0 {
		return nil, bad("%s is an empty archive", file)
	}
	if len(docs) == 0 {
		return nil, bad("%s holds no configuration documents (etc/)", file)
	}
	return docs, nil
}

// restore brings an archive's documents in through their owners.
func (s *Service) restore(ctx context.Context, in *api.RestoreRequest) (*api.RestoreAnswer, error) {
	docs, err := readArchive(in.File)
	if err != nil {
		return nil, err
	}
	before, err := s.running(ctx)
	var undo *versions.Record
	if err == nil {
		undo, err = s.versions.Save(ctx, before, savedBy(ctx), "before restore of "+filepath.Base(in.File), true)
	}
	if err != nil {
		ae := apierr.From(err)
		return nil, ae.With("next", "nothing was changed: the running configuration could not be saved first; fix that, then restore again")
	}
	a := &api.RestoreAnswer{Documents: []string{}, UndoVersion: undo.ID}
	if a.UndoFile, err = s.writeUndo(ctx, undo.ID); err != nil {
		s.deps.Log.Warn("restore: undo archive not written", "version", undo.ID, "err", err)
	}
	taken := map[string]bool{}
	var failures []string
	for _, o := range s.owners {
		res, err := bus.Invoke(ctx, s.deps.NC, o.Import, &api.ConfigDocuments{Documents: docs})
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
	var left []string
	for _, p := range confdoc.Paths(docs) {
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
		for _, o := range s.owners {
			if _, err := bus.Invoke(context.WithoutCancel(ctx), s.deps.NC, o.Import, &api.ConfigDocuments{Documents: before}); err != nil {
				backErr = append(backErr, fmt.Sprintf("%s: %v", o.Service, err))
			}
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
	return a, nil
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
	docs, err := s.versions.Documents(ctx, rec)
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
	if err := writeArchive(f, docs, nil, Manifest{}); err != nil {
		f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	return name, os.Rename(name+".tmp", name)
}
