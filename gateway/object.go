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

// writeObject streams an answer that a service left in the JetStream object
// store (api.ArchiveObjectHeader names bucket/object: an archive too large
// for one bus message) to the client, chunk by chunk, then deletes it.
func (g *Gateway) writeObject(w http.ResponseWriter, r *http.Request, rep *pb.Reply, ref string) {
	bucket, name, ok := strings.Cut(ref, "/")
	if !ok || bucket != api.ArchiveBucket {
		writeError(w, apierr.Internal(ref, "service named an unknown object"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Minute)
	defer cancel()
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
