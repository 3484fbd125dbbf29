package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"routerd.dev/gateway"
	"routerd.dev/proto"
	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

const key = "s3cret-key"

// echo is a service that answers with the envelope it received, so a test
// sees exactly what the gateway put on the bus.
func echo(t *testing.T, nc *nats.Conn, subjects ...string) {
	t.Helper()
	var eps []bus.Endpoint
	for _, s := range subjects {
		s := s
		eps = append(eps, bus.Endpoint{Subject: s, Handler: func(ctx context.Context, req *pb.Request) (int, any, error) {
			if req.Params["name"] == "broken" {
				return 0, nil, &store.BrokenError{Keys: []string{"/router/subscribers/plans/broken"}}
			}
			if req.Params["name"] == "missing" {
				return 0, nil, apierr.NotFound("No such plan: missing")
			}
			return http.StatusOK, map[string]any{"subject": s, "req": req}, nil
		}})
	}
	svc, err := bus.Serve(nc, bus.ServiceConfig{Name: "echo", Version: "0.0.1", Endpoints: eps, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop() })
}

type fixture struct {
	url     string
	authLog string
}

func serve(t *testing.T, apiKey string) fixture {
	t.Helper()
	nc := testenv.NATS(t) // the gateway holds no state: no etcd
	echo(t, nc, api.PlansList.Subject(), api.PlansPut.Subject(), api.PlansDelete.Subject(), api.StatusGet.Subject())
	logPath := filepath.Join(t.TempDir(), "auth.log")
	al, err := gateway.NewAuthLog(logPath)
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{APIKey: apiKey, AuthLog: al, NC: nc, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { gw.Serve(ctx, l); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return fixture{url: "http://" + l.Addr().String(), authLog: logPath}
}

type answer struct {
	status int
	raw    string
	body   map[string]any
}

func do(t *testing.T, method, url string, body io.Reader, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

var withKey = map[string]string{"X-API-Key": key}

// envelope digs out what the echo service received.
func envelope(t *testing.T, a answer) (string, pb.Request) {
	t.Helper()
	if a.status != 200 {
		t.Fatalf("status %d: %s", a.status, a.raw)
	}
	raw, _ := json.Marshal(a.body["req"])
	var req pb.Request
	if err := json.Unmarshal(raw, &req); err != nil {
		t.Fatal(err)
	}
	return a.body["subject"].(string), req
}

func TestAuthentication(t *testing.T) {
	f := serve(t, key)
	wantErr := map[string]any{"ok": false, "code": float64(401), "error": "provide the X-API-Key header or the api_key parameter"}
	for _, tc := range []struct {
		name string
		url  string
		hdr  map[string]string
		want int
	}{
		{"no key", "/status", nil, 401},
		{"wrong header", "/status", map[string]string{"X-API-Key": "nope"}, 401},
		{"wrong query with secrets", "/status?api_key=guess&pass=hunter2&password=pw2&community=ro-secret", nil, 401},
		{"prefix of the key", "/status", map[string]string{"X-API-Key": key[:4]}, 401},
		{"header", "/status", withKey, 200},
		{"query", "/status?api_key=" + key, nil, 200},
		{"unknown path still needs a key", "/nowhere", nil, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "GET", f.url+tc.url, nil, tc.hdr)
			if a.status != tc.want {
				t.Fatalf("status = %d, want %d (%s)", a.status, tc.want, a.raw)
			}
			if tc.want == 401 {
				if diff := cmp.Diff(wantErr, a.body); diff != "" {
					t.Errorf("401 body (-want +got):\n%s", diff)
				}
			}
		})
	}
	log, err := os.ReadFile(f.authLog)
	if err != nil {
		t.Fatal(err)
	}
	text := string(log)
	if got, want := strings.Count(text, "authentication FAILED from 127.0.0.1"), 5; got != want {
		t.Errorf("auth log has %d failures from 127.0.0.1, want %d:\n%s", got, want, text)
	}
	for _, secret := range []string{"guess", "hunter2", "pw2", "ro-secret", key[:4], "nope"} {
		if strings.Contains(text, secret) {
			t.Errorf("auth log leaks %q:\n%s", secret, text)
		}
	}
	if !strings.Contains(text, "api_key=***") || !strings.Contains(text, "pass=***") || !strings.Contains(text, "password=***") || !strings.Contains(text, "community=***") {
		t.Errorf("auth log does not show masked parameters:\n%s", text)
	}
}

func TestNoKeyConfiguredRefusesEverything(t *testing.T) {
	f := serve(t, "")
	for _, hdr := range []map[string]string{nil, {"X-API-Key": ""}, {"X-API-Key": "anything"}} {
		if a := do(t, "GET", f.url+"/status", nil, hdr); a.status != 401 {
			t.Errorf("with %v: status %d, want 401", hdr, a.status)
		}
	}
}

func TestFormatAndConventions(t *testing.T) {
	f := serve(t, key)

	a := do(t, "GET", f.url+"/plans", nil, withKey)
	if !strings.HasPrefix(a.raw, "{\n    \"") || !strings.HasSuffix(a.raw, "}\n") {
		t.Errorf("answer not indented by four spaces with a final newline:\n%q", a.raw[:40])
	}

	// Trailing slashes are ignored.
	subject, req := envelope(t, do(t, "GET", f.url+"/plans///", nil, withKey))
	if subject != api.PlansList.Subject() || req.Path != "/plans" {
		t.Errorf("GET /plans/// went to %s path %s", subject, req.Path)
	}

	// A body that is not a JSON object counts as empty.
	for _, body := range []string{`[1,2]`, `"text"`, `not json`, ``} {
		_, req := envelope(t, do(t, "POST", f.url+"/plans", strings.NewReader(body), withKey))
		if string(req.Args) != "{}" {
			t.Errorf("body %q: args = %s, want {}", body, req.Args)
		}
	}

	// Caller and by travel with the command; a bad by is refused.
	_, req = envelope(t, do(t, "POST", f.url+"/plans", strings.NewReader(`{"name":"x","by":"alice@noc"}`), withKey))
	if req.Caller != "127.0.0.1" || req.By != "alice@noc" || req.RequestID == "" {
		t.Errorf("envelope caller=%q by=%q id=%q", req.Caller, req.By, req.RequestID)
	}
	if a := do(t, "POST", f.url+"/plans", strings.NewReader(`{"by":"bad by!"}`), withKey); a.status != 400 || a.body["field"] != "by" {
		t.Errorf("bad by: %d %v", a.status, a.body)
	}

	// The spec's "any method other than POST and DELETE" lists plans.
	if subject, _ := envelope(t, do(t, "PUT", f.url+"/plans", nil, withKey)); subject != api.PlansList.Subject() {
		t.Errorf("PUT /plans went to %s", subject)
	}

	// Path parameters.
	subject, req = envelope(t, do(t, "DELETE", f.url+"/plans/gold", nil, withKey))
	if subject != api.PlansDelete.Subject() || req.Params["name"] != "gold" {
		t.Errorf("DELETE /plans/gold: %s %v", subject, req.Params)
	}
}

func TestBodyLimit(t *testing.T) {
	f := serve(t, key)
	big := bytes.Repeat([]byte("a"), gateway.MaxBody+1)
	a := do(t, "POST", f.url+"/plans", bytes.NewReader(big), withKey)
	if a.status != 413 || a.body["ok"] != false {
		t.Errorf("4 MiB + 1: %d %s", a.status, a.raw)
	}
	// A client that writes the whole body before it reads (Python's
	// urllib, many billing systems' libraries) gets the 413, not a reset.
	for _, size := range []int{gateway.MaxBody + 1, 20 << 20} {
		status, err := writeAllThenRead(f.url, size, false)
		if err != nil || status != 413 {
			t.Errorf("%d bytes sent before reading: status %d, err %v; want 413", size, status, err)
		}
	}
	// One that waits for 100 Continue is told at once and sends nothing.
	if status, err := writeAllThenRead(f.url, 20<<20, true); err != nil || status != 413 {
		t.Errorf("Expect: 100-continue: status %d, err %v; want 413", status, err)
	}
	// A large JSON body reaches the service whole (the bus carries it).
	large := `{"name":"big","comment":"` + strings.Repeat("c", 3<<20) + `"}`
	_, req := envelope(t, do(t, "POST", f.url+"/plans", strings.NewReader(large), withKey))
	if len(req.Args) != len(large) {
		t.Errorf("3 MiB body: %d bytes reached the service, want %d", len(req.Args), len(large))
	}
	// Exactly 4 MiB is read (and, not being JSON, counts as empty).
	ok := bytes.Repeat([]byte(" "), gateway.MaxBody)
	if a := do(t, "POST", f.url+"/plans", bytes.NewReader(ok), withKey); a.status != 200 {
		t.Errorf("4 MiB: %d", a.status)
	}
}

func TestUsageAndMethodNotAllowed(t *testing.T) {
	f := serve(t, key)
	a := do(t, "GET", f.url+"/no/such/resource", nil, withKey)
	if a.status != 200 || a.body["api"] != proto.Banner {
		t.Errorf("unknown path: %d %v", a.status, a.body)
	}
	if !strings.Contains(proto.Banner, "v1.0") {
		t.Errorf("banner %q does not name v1.0", proto.Banner)
	}
	a = do(t, "PATCH", f.url+"/status", nil, withKey)
	if a.status != 405 {
		t.Fatalf("PATCH /status: %d", a.status)
	}
	if diff := cmp.Diff([]any{"GET /status"}, a.body["allowed"]); diff != "" {
		t.Errorf("allowed (-want +got):\n%s", diff)
	}
}

func TestActionAPI(t *testing.T) {
	f := serve(t, key)
	// The action form reaches the same subject as the REST form, with the
	// query as arguments and the REST method in the envelope.
	subject, req := envelope(t, do(t, "GET", f.url+"/api?action=plan-add&name=gold&down_mbps=100&up_mbps=20&api_key="+key, nil, nil))
	if subject != api.PlansPut.Subject() || req.Method != "POST" || req.Action != "plan-add" {
		t.Errorf("plan-add: subject %s method %s action %s", subject, req.Method, req.Action)
	}
	var args map[string]string
	_ = json.Unmarshal(req.Args, &args)
	if diff := cmp.Diff(map[string]string{"name": "gold", "down_mbps": "100", "up_mbps": "20"}, args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	subject, req = envelope(t, do(t, "GET", f.url+"/api?action=plan-del&name=gold", nil, withKey))
	if subject != api.PlansDelete.Subject() || string(req.Args) != `{"name":"gold"}` || req.Method != "DELETE" {
		t.Errorf("plan-del: %s %s %s", subject, req.Args, req.Method)
	}
	a := do(t, "GET", f.url+"/api?action=no-such", nil, withKey)
	if a.status != 400 || a.body["error"] != "Unknown action" {
		t.Fatalf("unknown action: %d %v", a.status, a.body)
	}
	names, _ := a.body["actions"].([]any)
	if len(names) == 0 || len(names) > 500 { // the whole contract has a few hundred
		t.Errorf("unknown action lists %d actions", len(names))
	}
	for _, n := range names {
		found := false
		for _, op := range api.Table {
			if op.Describe().Action == n {
				found = true
			}
		}
		if !found {
			t.Errorf("listed action %v is not in the table", n)
		}
	}
}

func TestServiceErrors(t *testing.T) {
	f := serve(t, key)
	a := do(t, "DELETE", f.url+"/plans/broken", nil, withKey)
	if a.status != 500 {
		t.Fatalf("broken document: %d %s", a.status, a.raw)
	}
	if diff := cmp.Diff([]any{"subscribers/plans/broken"}, a.body["broken_data_files"]); diff != "" {
		t.Errorf("broken_data_files (-want +got):\n%s", diff)
	}
	a = do(t, "DELETE", f.url+"/plans/missing", nil, withKey)
	if diff := cmp.Diff(map[string]any{"ok": false, "code": float64(404), "error": "No such plan: missing"}, a.body); a.status != 404 || diff != "" {
		t.Errorf("404 (%d) (-want +got):\n%s", a.status, diff)
	}
	// A route whose service is not running is a 503 naming the subject.
	a = do(t, "GET", f.url+"/routes", nil, withKey)
	if a.status != 503 || !strings.Contains(a.raw, api.RoutesList.Subject()) {
		t.Errorf("service down: %d %s", a.status, a.raw)
	}
}

// writeAllThenRead posts size bytes on a raw connection, writing the whole
// body before reading anything (unless expect100, when it sends only the
// head and waits), and returns the answer's status.
func writeAllThenRead(base string, size int, expect100 bool) (int, error) {
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	head := fmt.Sprintf("POST /plans HTTP/1.1\r\nHost: x\r\nX-API-Key: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", key, size)
	if expect100 {
		head += "Expect: 100-continue\r\n"
	}
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		return 0, err
	}
	if !expect100 {
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			n := min(len(chunk), size-sent)
			if _, err := conn.Write(chunk[:n]); err != nil {
				return 0, fmt.Errorf("writing the body: %w", err)
			}
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}
