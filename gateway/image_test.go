package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net"
	"net/http"
	"testing"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestImageAnswer: an operation whose service answers bus.Raw with
// image/png (GET /graph/{name}) reaches the client as those bytes with
// that Content-Type, not re-encoded as JSON; its errors stay JSON {error}.
func TestImageAnswer(t *testing.T) {
	nc := testenv.NATS(t)
	img := image.NewRGBA(image.Rect(0, 0, 4, 3))
	img.Set(1, 1, color.RGBA{0, 200, 0, 255})
	var pic bytes.Buffer
	if err := png.Encode(&pic, img); err != nil {
		t.Fatal(err)
	}
	svc, err := bus.Serve(nc, bus.ServiceConfig{Name: "graph", Version: "1.0.0", Log: testenv.Log(t), Endpoints: []bus.Endpoint{{
		Subject: api.GraphGet.Subject(),
		Handler: func(_ context.Context, req *pb.Request) (int, any, error) {
			var in api.GraphRequest
			if err := api.GraphGet.Decode(bus.Arguments(req), &in); err != nil {
				return 0, nil, err
			}
			if in.Name != "eth0" || in.Period != "hour" {
				return 0, nil, apierr.NotFound("no samples for %s (%s)", in.Name, in.Period)
			}
			return 200, bus.Raw{ContentType: "image/png", Data: pic.Bytes()}, nil
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Stop() })
	gw, err := gateway.New(gateway.Config{APIKey: key, NC: nc, Log: testenv.Log(t), Table: []api.Operation{api.GraphGet}})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	go func() { _ = gw.Serve(ctx, l) }()

	get := func(path string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+l.Addr().String()+path, nil)
		req.Header.Set("X-API-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	resp, body := get("/graph/eth0?period=hour")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || !bytes.Equal(body, pic.Bytes()) {
		t.Fatalf("graph: %d %q %d bytes (sent %d)", resp.StatusCode, resp.Header.Get("Content-Type"), len(body), pic.Len())
	}
	if _, err := png.Decode(bytes.NewReader(body)); err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	for path, want := range map[string]int{"/graph/eth9?period=hour": 404, "/graph/eth0?period=fortnight": 400} {
		resp, body := get(path)
		var e map[string]any
		if resp.StatusCode != want || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &e) != nil || e["error"] == nil {
			t.Errorf("%s: %d %q %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if want == 400 && e["field"] != "period" {
			t.Errorf("%s: field %v", path, e["field"])
		}
	}
}
