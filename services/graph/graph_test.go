package graph_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/graph"
	"routerd.dev/services/graph/chart"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// veth joins router and far by vg0 (10.99.0.1/24) and vg0p (10.99.0.2/24).
func veth(t *testing.T, router, far *netns.NS) {
	t.Helper()
	nl, err := router.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "vg0"}, PeerName: "vg0p"}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	peer, _ := nl.LinkByName("vg0p")
	if err := nl.LinkSetNsFd(peer, far.FD()); err != nil {
		t.Fatal(err)
	}
	testenv.Run(t, router, "ip", "addr", "add", "10.99.0.1/24", "dev", "vg0")
	testenv.Run(t, router, "ip", "link", "set", "vg0", "up")
	testenv.Run(t, far, "ip", "addr", "add", "10.99.0.2/24", "dev", "vg0p")
	testenv.Run(t, far, "ip", "link", "set", "vg0p", "up")
}

// start runs the service until the returned stop is called.
func start(t *testing.T, env *testenv.Env, ns *netns.NS, dir string, every time.Duration) (stop func()) {
	t.Helper()
	svc := graph.New(graph.Deps{NC: env.NC, KV: env.KV, Log: testenv.Log(t), NS: ns, StateDir: dir, SampleEvery: every})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil && err != context.Canceled {
				t.Errorf("service: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the service did not stop in 10 s")
		}
	}
	t.Cleanup(stop)
	// Up when its endpoint answers (anything but 503).
	testenv.Eventually(t, 10*time.Second, func() error {
		if st, _, _ := get(t, env.NC, "nosuch0", ""); st == 503 {
			return fmt.Errorf("graph service not answering")
		}
		return nil
	})
	return stop
}

// get asks GET /graph/{name} on the bus: the status, the content type
// and the body.
func get(t *testing.T, nc *nats.Conn, name, period string) (int, string, []byte) {
	t.Helper()
	req := &pb.Request{Method: "GET", Path: "/graph/" + name, Params: map[string]string{"name": name}, Query: url.Values{}, RequestID: "test"}
	if period != "" {
		req.Query.Set("period", period)
	}
	rep, err := bus.CallOp(context.Background(), nc, api.GraphGet.Describe(), req)
	if err != nil {
		return apierr.From(err).Status(), "", []byte(err.Error())
	}
	return rep.Status, rep.ContentType, rep.Body
}

// curve counts the plot's pixels of in's colour, and of out's above the
// zero line.
func curve(t *testing.T, body []byte) (in, out int) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b != image.Rect(0, 0, chart.Width, chart.Height) {
		t.Fatalf("PNG of %v", b)
	}
	same := func(a, b interface{ RGBA() (r, g, b, a uint32) }) bool {
		r1, g1, b1, _ := a.RGBA()
		r2, g2, b2, _ := b.RGBA()
		return r1 == r2 && g1 == g2 && b1 == b2
	}
	for x := chart.Left; x < chart.Left+chart.PlotW; x++ {
		for y := chart.Top; y < chart.Top+chart.PlotH-2; y++ {
			switch c := img.At(x, y); {
			case same(c, chart.InColor):
				in++
			case same(c, chart.OutColor):
				out++
			}
		}
	}
	return in, out
}

// TestInterfaceGraph: no graph before a sample (404 {error}), a bad
// period is a 400 naming it; with samples every 200 ms and pings across a
// veth, the interface's hour graph is a PNG whose in and out curves rise
// above zero; a restarted service still draws them from its files.
func TestInterfaceGraph(t *testing.T) {
	env := testenv.Start(t)
	router, far := testenv.Netns(t), testenv.Netns(t)
	veth(t, router, far)
	dir := t.TempDir()

	// A service whose first round is an hour away: nothing sampled yet.
	stop := start(t, env, router, dir, time.Hour)
	if st, _, body := get(t, env.NC, "vg0", "hour"); st != 404 || !bytes.Contains(body, []byte(`"error"`)) {
		t.Fatalf("before any sample: %d %s", st, body)
	}
	if st, _, body := get(t, env.NC, "vg0", "fortnight"); st != 400 || !bytes.Contains(body, []byte(`"period"`)) {
		t.Fatalf("bad period: %d %s", st, body)
	}
	stop()

	stop = start(t, env, router, dir, 200*time.Millisecond)
	testenv.Eventually(t, 10*time.Second, func() error {
		if st, _, body := get(t, env.NC, "vg0", "hour"); st != 200 {
			return fmt.Errorf("no graph yet: %d %s", st, body)
		}
		return nil
	})
	testenv.Run(t, far, "ping", "-q", "-c", "20", "-i", "0.1", "-s", "1400", "-W", "1", "10.99.0.1")
	var png []byte
	testenv.Eventually(t, 10*time.Second, func() error {
		st, ct, body := get(t, env.NC, "vg0", "hour")
		if st != 200 || ct != "image/png" {
			return fmt.Errorf("GET /graph/vg0: %d %s %s", st, ct, body)
		}
		if in, out := curve(t, body); in == 0 || out == 0 {
			return fmt.Errorf("flat graph: %d in pixels, %d out pixels above zero", in, out)
		}
		png = body
		return nil
	})
	if st, ct, body := get(t, env.NC, "vg0", ""); st != 200 || ct != "image/png" {
		t.Errorf("default period (day): %d %s %.200s", st, ct, body)
	}
	if st, _, body := get(t, env.NC, "02:00:00:00:00:99", "hour"); st != 404 {
		t.Errorf("unknown client: %d %s", st, body)
	}
	stop()

	// Restarted (sampling slowly, so nothing new is written): the samples
	// are read back from its files.
	start(t, env, router, dir, 200*time.Millisecond)
	st, ct, body := get(t, env.NC, "vg0", "hour")
	if st != 200 || ct != "image/png" {
		t.Fatalf("after a restart: %d %s %s", st, ct, body)
	}
	in0, _ := curve(t, png)
	if in, out := curve(t, body); in == 0 || out == 0 || in < in0/2 {
		t.Fatalf("after a restart: %d in pixels (%d before), %d out", in, in0, out)
	}
}
