package gateway

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
)

// archiveSendLimit bounds how long one archive download may take.
const archiveSendLimit = 10 * time.Minute

// writeObject streams an answer that a service left in the JetStream object
// store (api.ArchiveObjectHeader names bucket/object: an archive too large
// for one bus message) to the client, chunk by chunk, then deletes it.
func (g *Gateway) writeObject(w http.ResponseWriter, r *http.Request, rep *pb.Reply, ref string) {
	bucket, name, ok := strings.Cut(ref, "/")
	if !ok || bucket != api.ArchiveBucket {
		writeError(w, apierr.Internal(ref, "service named an unknown object"))
		return
	}
	// The object's reader blocks each read until its context's deadline
	// (holding its lock, so Close cannot interrupt it), and a cancelled
	// context drops its chunk subscription: with a deadline 10 minutes
	// out, a client that hung up mid-download left the read waiting that
	// long for chunks that never came, and held a graceful shutdown past
	// its 10 s (TestLabBackupRestore, when it stopped reading early). So
	// the context has no deadline (each read then waits at most the
	// object store's API timeout, seconds, and sees the cancellation after
	// it), and the 10 minutes are a timer that cancels it.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	bound := time.AfterFunc(archiveSendLimit, cancel)
	defer bound.Stop()
	js, err := jetstream.New(g.cfg.NC)
	if err != nil {
		writeError(w, apierr.Internal(err.Error(), "archive not available"))
		return
	}
	obs, err := js.ObjectStore(ctx, bucket)
	if err != nil {
		writeError(w, apierr.Internal(err.Error(), "archive not available"))
		return
	}
	defer func() { _ = obs.Delete(context.WithoutCancel(ctx), name) }()
	res, err := obs.Get(ctx, name)
	if err != nil {
		writeError(w, apierr.Internal(err.Error(), "archive not available"))
		return
	}
	defer res.Close()
	for k, v := range rep.Headers {
		if k != api.ArchiveObjectHeader {
			w.Header().Set(k, v)
		}
	}
	if info, err := res.Info(); err == nil {
		w.Header().Set("Content-Length", strconv.FormatUint(info.Size, 10))
	}
	w.Header().Set("Content-Type", rep.ContentType)
	w.WriteHeader(rep.Status)
	if _, err := io.Copy(w, res); err != nil {
		g.cfg.Log.Error("archive not sent whole", "object", ref, "err", err)
	}
}
