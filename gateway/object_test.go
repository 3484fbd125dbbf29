package gateway_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestArchiveClientHangsUp: a client that stops reading an archive half
// way and hangs up does not hold the gateway: its graceful shutdown
// finishes in time. (The object's reader waited until its context's
// deadline, 10 minutes, for chunks that stopped coming once the request
// was cancelled; TestLabBackupRestore saw routerd's stop time out so.)
func TestArchiveClientHangsUp(t *testing.T) {
	nc := testenv.NATS(t)
	ctx := context.Background()
	// The object's 8,192 chunks are published asynchronously: room for
	// all of them, so a loaded machine's slow acknowledgements stall
	// nothing (the default 4,000 pending with 8,192 chunks failed a CI
	// run: "stalled with too many outstanding async published messages").
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1<<14))
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: api.ArchiveBucket})
	if err != nil {
		t.Fatal(err)
	}
	// Small chunks, as gzip's writes made them before the system service
	// buffered its archive: the copy to the client waits on reads of the
	// object, not on writes to the client, when the client hangs up.
	data := make([]byte, 4<<20)
	_, _ = rand.Read(data)
	meta := jetstream.ObjectMeta{Name: "big.tar.gz", Opts: &jetstream.ObjectMetaOptions{ChunkSize: 512}}
	if _, err := obs.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	svc, err := bus.Serve(nc, bus.ServiceConfig{Name: "system", Version: "1.0.0", Log: testenv.Log(t), Endpoints: []bus.Endpoint{{
		Subject: api.BackupGet.Subject(),
		Handler: func(context.Context, *pb.Request) (int, any, error) {
			return 200, bus.Raw{ContentType: "application/gzip", Headers: map[string]string{
				api.ArchiveObjectHeader: api.ArchiveBucket + "/big.tar.gz"}}, nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	gw, err := gateway.New(gateway.Config{APIKey: key, NC: nc, Log: testenv.Log(t), Table: []api.Operation{api.BackupGet}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- gw.Serve(sctx, l) }()
	defer stop()

	req, _ := http.NewRequest("GET", "http://"+l.Addr().String()+"/backup", nil)
	req.Header.Set("X-API-Key", key)
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /backup: %d", resp.StatusCode)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // hung up with most of the archive unread

	stop()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("graceful shutdown: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gateway did not stop in 30 s")
	}
}
