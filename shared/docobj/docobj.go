// Package docobj moves configuration documents that grow with the number
// of subscribers (etc/clients.json, etc/dhcp-reservations.json) between
// the system service and their owners as objects of the JetStream object
// store api.ConfigBucket rather than as bus messages: the writer streams
// the text in as it renders it, the reader decodes it as it arrives, so
// neither side ever holds a document of 100,000 clients whole, and no bus
// message carries more than a name (api.ConfigDocuments.Objects).
//
// Objects are written by whoever renders a document (an owner's export,
// the system service unpacking an archive) and deleted by the system
// service once the backup or restore that needed them is over; objects a
// dead process left behind expire after TTL.
package docobj

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"routerd.dev/proto/api"
)

// TTL is how long an object lives at most: longer than any backup or
// restore takes.
const TTL = 30 * time.Minute

// Bucket opens (creating when missing) the object store of documents.
func Bucket(ctx context.Context, nc *nats.Conn) (jetstream.ObjectStore, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: api.ConfigBucket, Description: "configuration documents between the system service and their owners",
		TTL: TTL, Storage: jetstream.FileStorage,
	})
}

// InlineMax is the largest document Render gives as text: a few of them
// fit one bus message beside each other. A variable so that tests send
// documents of a few records as objects.
var InlineMax = 256 << 10

// Render runs render and gives its output as text when it stays within
// InlineMax bytes, else as an object (streamed into the store from the
// moment it outgrows InlineMax: never held whole). Small configurations
// thus travel as before, in the message.
func Render(ctx context.Context, nc *nats.Conn, path string, render func(w io.Writer) error) (string, *api.ConfigObject, error) {
	sw := &spillWriter{ctx: ctx, nc: nc, path: path}
	err := render(sw)
	if sw.pw == nil {
		if err != nil {
			return "", nil, err
		}
		return sw.buf.String(), nil, nil
	}
	sw.pw.CloseWithError(err)
	r := <-sw.done
	if err == nil {
		err = r.err
	}
	if err != nil {
		if r.err == nil {
			Delete(context.WithoutCancel(ctx), nc, map[string]api.ConfigObject{path: r.obj})
		}
		return "", nil, err
	}
	return "", &r.obj, nil
}

// spillWriter keeps what is written in memory up to InlineMax, then
// moves it, and everything after, into an object through a pipe.
type spillWriter struct {
	ctx  context.Context
	nc   *nats.Conn
	path string
	buf  bytes.Buffer
	pw   *io.PipeWriter
	done chan putResult
}

type putResult struct {
	obj api.ConfigObject
	err error
}

func (w *spillWriter) Write(p []byte) (int, error) {
	if w.pw != nil {
		return w.pw.Write(p)
	}
	if w.buf.Len()+len(p) <= InlineMax {
		return w.buf.Write(p)
	}
	pr, pw := io.Pipe()
	w.pw, w.done = pw, make(chan putResult, 1)
	go func() {
		obj, err := Write(w.ctx, w.nc, w.path, func(out io.Writer) error {
			_, err := io.Copy(out, pr)
			return err
		})
		pr.CloseWithError(io.ErrClosedPipe)
		w.done <- putResult{obj, err}
	}()
	if _, err := pw.Write(w.buf.Bytes()); err != nil {
		return 0, err
	}
	w.buf = bytes.Buffer{}
	return pw.Write(p)
}

// Reader opens the document at path of in, given as text or as an
// object; ok is false when in holds no such document.
func Reader(ctx context.Context, nc *nats.Conn, in *api.ConfigDocuments, path string) (r io.ReadCloser, ok bool, err error) {
	if o, ok := in.Objects[path]; ok {
		r, err := Open(ctx, nc, o)
		return r, true, err
	}
	if t, ok := in.Documents[path]; ok {
		return io.NopCloser(strings.NewReader(t)), true, nil
	}
	return nil, false, nil
}

// Has reports whether in holds a document at path, in either form.
func Has(in *api.ConfigDocuments, path string) bool {
	_, obj := in.Objects[path]
	_, text := in.Documents[path]
	return obj || text
}

// Write stores what render writes as a new object and names it. The text
// goes to the store in chunks while render runs; an error of render
// removes what was stored.
func Write(ctx context.Context, nc *nats.Conn, path string, render func(w io.Writer) error) (api.ConfigObject, error) {
	obs, err := Bucket(ctx, nc)
	if err != nil {
		return api.ConfigObject{}, fmt.Errorf("%s: the document store of the bus: %w", path, err)
	}
	return WriteTo(ctx, obs, path, render)
}

// WriteTo is Write into an object store already open.
func WriteTo(ctx context.Context, obs jetstream.ObjectStore, path string, render func(w io.Writer) error) (api.ConfigObject, error) {
	name := strings.NewReplacer("/", "_", ".", "_").Replace(path) + "." + nuid.Next()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(render(pw)) }()
	info, err := obs.Put(ctx, jetstream.ObjectMeta{Name: name}, pr)
	pr.CloseWithError(io.ErrClosedPipe) // render stops if the store failed first
	if err != nil {
		_ = obs.Delete(context.WithoutCancel(ctx), name)
		return api.ConfigObject{}, fmt.Errorf("%s: %w", path, err)
	}
	return api.ConfigObject{Object: name, Bytes: int64(info.Size)}, nil
}

// Open reads an object as a stream; the caller closes it. A stream that
// ends early or damaged is an error of its Read.
func Open(ctx context.Context, nc *nats.Conn, o api.ConfigObject) (io.ReadCloser, error) {
	obs, err := Bucket(ctx, nc)
	if err != nil {
		return nil, err
	}
	r, err := obs.Get(ctx, o.Object)
	if err != nil {
		return nil, fmt.Errorf("document object %s: %w", o.Object, err)
	}
	return r, nil
}

// Text reads an object whole: for the documents small enough to hold
// (and for what needs a document whole: config-diff, config-show).
func Text(ctx context.Context, nc *nats.Conn, o api.ConfigObject) (string, error) {
	r, err := Open(ctx, nc, o)
	if err != nil {
		return "", err
	}
	defer r.Close()
	var b strings.Builder
	b.Grow(int(o.Bytes))
	if _, err := io.Copy(&b, r); err != nil {
		return "", fmt.Errorf("document object %s: %w", o.Object, err)
	}
	return b.String(), nil
}

// Delete removes objects, ignoring those already gone (they expire too).
func Delete(ctx context.Context, nc *nats.Conn, objs map[string]api.ConfigObject) {
	if len(objs) == 0 {
		return
	}
	obs, err := Bucket(ctx, nc)
	if err != nil {
		return
	}
	for _, o := range objs {
		_ = obs.Delete(ctx, o.Object)
	}
}
