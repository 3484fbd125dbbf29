package olt_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/olt"
	"routerd.dev/services/olt/sim"
	"routerd.dev/services/subscribers"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

const (
	apiKey   = "test-key"
	simUser  = "opsadmin"
	simPass  = "Zq7-sealed-Pw!x"
	simSN    = "48575443AABBCC01"
	simPort  = "0/1/0"
	stateDir = ""
)

// syncBuf is a log destination tests can read while services write.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

type rig struct {
	url     string
	env     *testenv.Env
	sim     *sim.Server
	simHost string
	simPort string
	logs    *syncBuf
	state   string
}

// start runs the olt and subscribers services, a gateway in front of
// them, and one simulated OLT.
func start(t testing.TB) *rig {
	t.Helper()
	env := testenv.Start(t)
	if err := bus.EnsureStream(context.Background(), env.NC); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := sim.Start(ctx, sim.Config{OLTs: []sim.OLTConfig{{Name: "LAB-OLT", User: simUser, Pass: simPass,
		Autofind: []sim.AutofindONT{{Port: simPort, SN: simSN}}}}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuf{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testWriter{t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	state := t.TempDir()
	if err := os.WriteFile(filepath.Join(state, olt.LicenceFile), []byte(`{"features":["olt-write"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	o := olt.New(olt.Deps{NC: env.NC, KV: env.KV, Log: log, StateDir: state})
	subs := subscribers.New(subscribers.Deps{NC: env.NC, KV: env.KV, Log: log})
	for _, run := range []func(context.Context) error{o.Run, subs.Run} {
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx) }()
	}
	gw, err := gateway.New(gateway.Config{APIKey: apiKey, NC: env.NC, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() { defer wg.Done(); gw.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); wg.Wait(); srv.Close() })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, olt.Name, subscribers.Name); missing != nil {
		t.Fatalf("not registered: %v", missing)
	}
	host, port, _ := net.SplitHostPort(srv.TelnetAddr())
	// micro answers the discovery ping before the last endpoints are
	// subscribed: wait until the last one bound answers.
	testenv.Eventually(t, 10*time.Second, func() error {
		rep, err := bus.Call(ctx, env.NC, api.OLTInitOp.Subject(), &pb.Request{Method: "POST", Args: json.RawMessage(`{}`)})
		if err != nil {
			return err
		}
		if rep.Status == 503 {
			return fmt.Errorf("olt.op.init not served yet")
		}
		return nil
	})
	return &rig{url: "http://" + l.Addr().String(), env: env, sim: srv, simHost: host, simPort: port, logs: logs, state: state}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

type answer struct {
	status int
	raw    string
	body   map[string]any
}

func (r *rig) do(t testing.TB, method, path string, body any, hdr map[string]string) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, _ := json.Marshal(b)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, r.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-API-Key", apiKey)
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

// oneOff are the simulator's credentials as a body.
func (r *rig) oneOff(extra map[string]any) map[string]any {
	m := map[string]any{"host": r.simHost, "port": r.simPort, "user": simUser, "pass": simPass}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func (r *rig) register(t *testing.T, name string, extra map[string]any) {
	t.Helper()
	body := map[string]any{"name": name, "host": r.simHost, "port": r.simPort, "user": simUser, "password": simPass}
	for k, v := range extra {
		body[k] = v
	}
	if a := r.do(t, "POST", "/olts", body, nil); a.status != 201 {
		t.Fatalf("register %s: %d %s", name, a.status, a.raw)
	}
}

func want(t *testing.T, a answer, status int) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.raw)
	}
}

// envelope checks the answer envelope of Document 3.
func envelope(t *testing.T, a answer, op string, code int) {
	t.Helper()
	want(t, a, code)
	for _, k := range []string{"ok", "code", "op", "olt", "took_ms", "result", "error"} {
		if _, ok := a.body[k]; !ok {
			t.Errorf("envelope lacks %s: %s", k, a.raw)
		}
	}
	if a.body["op"] != op || a.body["code"] != float64(code) || a.body["ok"] != (code == 200) {
		t.Errorf("envelope op/code/ok: %s", a.raw)
	}
	if code != 200 {
		if a.body["error"] == nil || a.body["raw"] == nil {
			t.Errorf("failure without error or raw: %s", a.raw)
		}
	}
}

func TestUsageAndUnknown(t *testing.T) {
	r := start(t)
	a := r.do(t, "GET", "/olt", nil, nil)
	want(t, a, 200)
	specOps := strings.Split("info, autofind, onus, vlans, serviceports, profiles, config, run, audit, boards, pon-ports, port-optical, counters, exec, vlan-add, vlan-del, port-vlan, profile-add, profile-del, ont-add, ont-del, ont-reboot, ont-desc, ont-optical, ntp, sysname, save, plan-sync, init, ont-activate, ont-deactivate, ont-replan", ", ")
	specWrites := strings.Split("exec, vlan-add, vlan-del, port-vlan, profile-add, profile-del, ont-add, ont-del, ont-reboot, ont-desc, ntp, sysname, save, plan-sync, init, ont-activate, ont-deactivate, ont-replan", ", ")
	slices.Sort(specOps)
	slices.Sort(specWrites)
	if got := strs(a.body["ops"]); !slices.Equal(got, specOps) {
		t.Errorf("ops %v\nwant %v", got, specOps)
	}
	if got := strs(a.body["write_ops"]); !slices.Equal(got, specWrites) {
		t.Errorf("write_ops %v\nwant %v", got, specWrites)
	}
	if a.body["usage"] == "" {
		t.Error("no usage")
	}
	if n := r.sim.OLT(0).Commands(); n != 0 {
		t.Errorf("GET /olt sent %d commands to an OLT", n)
	}
	// Every op of the list has its own route and action form.
	for _, op := range specOps {
		a := r.do(t, "POST", "/olt/"+op, map[string]any{}, nil)
		if a.status == 404 {
			t.Errorf("POST /olt/%s: 404", op)
		}
	}

	a = r.do(t, "POST", "/olt/frobnicate", r.oneOff(nil), nil)
	want(t, a, 404)
	if len(strs(a.body["ops"])) != len(specOps) {
		t.Errorf("404 without ops: %s", a.raw)
	}
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		a = r.do(t, m, "/olt/info", nil, nil)
		want(t, a, 405)
		if !strings.Contains(a.raw, "POST") {
			t.Errorf("%s /olt/info: 405 not naming POST: %s", m, a.raw)
		}
	}
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestChoosingTheOLT(t *testing.T) {
	r := start(t)

	// Nothing registered, nothing sent: 400 naming the way out.
	a := r.do(t, "POST", "/olt/info", map[string]any{}, nil)
	want(t, a, 400)
	if !strings.Contains(a.raw, "host, user and pass") {
		t.Errorf("400 text: %s", a.raw)
	}
	// One-off credentials in the body (password alias).
	body := r.oneOff(nil)
	delete(body, "pass")
	body["password"] = simPass
	a = r.do(t, "POST", "/olt/info", body, nil)
	envelope(t, a, "info", 200)
	if o := a.body["olt"].(map[string]any); o["host"] != r.simHost || o["name"] != "" {
		t.Errorf("olt %v", o)
	}
	res := a.body["result"].(map[string]any)
	if res["sysname"] != "LAB-OLT" {
		t.Errorf("info result %v", res)
	}
	if _, ok := a.body["raw"]; ok {
		t.Error("raw without asking")
	}
	if _, ok := a.body["note"]; ok {
		t.Error("note after a read")
	}
	// raw when asked.
	a = r.do(t, "POST", "/olt/boards", r.oneOff(map[string]any{"raw": true}), nil)
	envelope(t, a, "boards", 200)
	if !strings.Contains(a.raw, "display board") {
		t.Errorf("raw lacks the command: %s", a.raw)
	}
	// The same in X-OLT-* headers.
	a = r.do(t, "POST", "/olt/info", nil, map[string]string{"X-OLT-Host": r.simHost, "X-OLT-Port": r.simPort,
		"X-OLT-User": simUser, "X-OLT-Pass": simPass, "X-OLT-Protocol": "telnet"})
	envelope(t, a, "info", 200)
	// Incomplete one-off credentials.
	a = r.do(t, "POST", "/olt/info", map[string]any{"host": r.simHost}, nil)
	want(t, a, 400)
	// Credentials in a URL: refused, REST and action form.
	q := url.Values{"host": {r.simHost}, "user": {simUser}, "pass": {simPass}}
	a = r.do(t, "POST", "/olt/info?"+q.Encode(), map[string]any{}, nil)
	want(t, a, 400)
	if !strings.Contains(a.raw, "never go in a URL") {
		t.Errorf("URL credentials: %s", a.raw)
	}
	q.Set("action", "olt-info")
	a = r.do(t, "GET", "/api?"+q.Encode(), nil, nil)
	want(t, a, 400)
	// A refused login is the envelope's 401, with the transcript.
	a = r.do(t, "POST", "/olt/info", r.oneOff(map[string]any{"pass": "wrong"}), nil)
	envelope(t, a, "info", 401)
	if strings.Contains(a.raw, "wrong\"") && strings.Contains(a.raw, "pass") {
		t.Errorf("answer echoes the password: %s", a.raw)
	}
	// timeout out of range.
	a = r.do(t, "POST", "/olt/info", r.oneOff(map[string]any{"timeout": 5}), nil)
	want(t, a, 400)
	if a.body["field"] != "timeout" {
		t.Errorf("field %v", a.body["field"])
	}
	// An unknown registered name.
	a = r.do(t, "POST", "/olt/info", map[string]any{"olt": "nosuch"}, nil)
	want(t, a, 404)
	a = r.do(t, "POST", "/olt/info", nil, map[string]string{"X-OLT-Name": "nosuch"})
	want(t, a, 404)

	// One registered OLT: chosen by name, by header, and by default.
	r.register(t, "lab", nil)
	for _, c := range []struct {
		body any
		hdr  map[string]string
	}{{map[string]any{"olt": "lab"}, nil}, {nil, map[string]string{"X-OLT-Name": "lab"}}, {map[string]any{}, nil}} {
		a = r.do(t, "POST", "/olt/autofind", c.body, c.hdr)
		envelope(t, a, "autofind", 200)
		if o := a.body["olt"].(map[string]any); o["name"] != "lab" {
			t.Errorf("olt %v", o)
		}
		if res := a.body["result"].(map[string]any); res["count"] != float64(1) {
			t.Errorf("autofind %v", res)
		}
	}
	// The action form with the name.
	a = r.do(t, "GET", "/api?action=olt-onus&olt=lab&port="+url.QueryEscape(simPort), nil, nil)
	envelope(t, a, "onus", 200)
	// The body's name wins over the header's.
	a = r.do(t, "POST", "/olt/info", map[string]any{"olt": "lab"}, map[string]string{"X-OLT-Name": "nosuch"})
	envelope(t, a, "info", 200)
	// Two registered: nothing chosen is a 400 again.
	r.register(t, "lab2", nil)
	a = r.do(t, "POST", "/olt/info", map[string]any{}, nil)
	want(t, a, 400)
}

func TestRegistrySealsCredentials(t *testing.T) {
	r := start(t)
	r.register(t, "east", map[string]any{"svlan": 3000, "iptv_vlan": 900, "comment": "pop east"})
	a := r.do(t, "POST", "/olts", map[string]any{"name": "east", "host": "10.0.0.9", "user": "u", "pass": "p"}, nil)
	want(t, a, 409)
	a = r.do(t, "POST", "/olts", map[string]any{"name": "west", "host": "10.0.0.9", "user": "u"}, nil)
	want(t, a, 400)
	if a.body["field"] != "pass" {
		t.Errorf("field %v", a.body["field"])
	}
	a = r.do(t, "POST", "/olts", map[string]any{"name": "bad name", "host": "10.0.0.9", "user": "u", "pass": "p"}, nil)
	want(t, a, 400)
	a = r.do(t, "POST", "/olts", map[string]any{"name": "w", "host": "10.0.0.9", "user": "u", "pass": "p", "svlan": 5000}, nil)
	want(t, a, 400)

	a = r.do(t, "GET", "/olts", nil, nil)
	want(t, a, 200)
	if a.body["count"] != float64(1) {
		t.Fatalf("list %s", a.raw)
	}
	rec := a.body["olts"].([]any)[0].(map[string]any)
	if rec["password_set"] != true || rec["svlan"] != float64(3000) || rec["protocol"] != "telnet" || rec["vendor"] != "huawei" {
		t.Errorf("record %v", rec)
	}
	for _, k := range []string{"pass", "password", "user", "sealed"} {
		if _, ok := rec[k]; ok {
			t.Errorf("record carries %s: %v", k, rec)
		}
	}
	// Change: svlan cleared, password re-sealed, the rest kept.
	a = r.do(t, "POST", "/olts/east", map[string]any{"svlan": 0, "pass": simPass}, nil)
	want(t, a, 200)
	if o := a.body["olt"].(map[string]any); o["svlan"] != float64(0) || o["iptv_vlan"] != float64(900) || o["comment"] != "pop east" {
		t.Errorf("set %s", a.raw)
	}
	want(t, r.do(t, "POST", "/olts/nosuch", map[string]any{"svlan": 1}, nil), 404)
	// It still logs in with the re-sealed password.
	envelope(t, r.do(t, "POST", "/olt/info", map[string]any{"olt": "east"}, nil), "info", 200)
	// Writes to the OLT and events go by too.
	envelope(t, r.do(t, "POST", "/olt/sysname", map[string]any{"olt": "east", "name": "EAST-1"}, nil), "sysname", 200)

	// Nothing in etcd, in the logs or in any answer holds the password or
	// the user in clear.
	resp, err := r.env.KV.Get(context.Background(), "/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		t.Fatal("etcd is empty")
	}
	for _, kv := range resp.Kvs {
		if bytes.Contains(kv.Value, []byte(simPass)) || bytes.Contains(kv.Value, []byte(simUser)) {
			t.Errorf("etcd %s holds the credentials in clear: %s", kv.Key, kv.Value)
		}
	}
	if strings.Contains(r.logs.String(), simPass) {
		t.Error("the logs hold the password")
	}
	// The key is a file of the state directory, 0600, not in etcd.
	fi, err := os.Stat(r.state + "/" + olt.KeyFile)
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Errorf("key file: %v %v", fi, err)
	}

	a = r.do(t, "DELETE", "/olts/east", nil, nil)
	want(t, a, 200)
	want(t, r.do(t, "DELETE", "/olts/east", nil, nil), 404)
	a = r.do(t, "GET", "/api?action=olts-list", nil, nil)
	want(t, a, 200)
	if a.body["count"] != float64(0) {
		t.Errorf("after delete: %s", a.raw)
	}
}

func TestWriteOperations(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	sub, err := r.env.NC.SubscribeSync("router.events.olt.>")
	if err != nil {
		t.Fatal(err)
	}
	want(t, r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 100, "up_mbps": 20}, nil), 201)

	// An unknown plan: 404, nothing sent.
	before := r.sim.OLT(0).Received("ont add")
	a := r.do(t, "POST", "/olt/ont-add", map[string]any{"pon": simPort, "sn": simSN, "vlan": 100, "plan": "nosuch"}, nil)
	want(t, a, 404)
	if r.sim.OLT(0).Received("ont add") != before {
		t.Error("ont add sent for an unknown plan")
	}
	// Free text with a line break never reaches the OLT.
	a = r.do(t, "POST", "/olt/ont-add", map[string]any{"port": simPort, "sn": simSN, "vlan": 100, "description": "x\nont deactivate 0 1"}, nil)
	want(t, a, 400)
	if a.body["field"] != "description" {
		t.Errorf("field %v", a.body["field"])
	}
	// Port is required for ont-add; a number is the TCP port, not a PON port.
	a = r.do(t, "POST", "/olt/ont-add", map[string]any{"sn": simSN, "vlan": 100}, nil)
	want(t, a, 400)
	if a.body["field"] != "port" {
		t.Errorf("field %v", a.body["field"])
	}
	// Dry run: planned, nothing changing sent, no note.
	a = r.do(t, "POST", "/olt/ont-add", map[string]any{"port": simPort, "sn": simSN, "vlan": 100, "plan": "gold", "dry_run": true}, nil)
	envelope(t, a, "ont-add", 200)
	if _, ok := a.body["note"]; ok {
		t.Error("note after a dry run")
	}
	if r.sim.OLT(0).Received("ont add") != before {
		t.Error("dry run sent ont add")
	}
	// The PON port's VLAN first (the action form, strings only).
	a = r.do(t, "GET", "/api?action=olt-vlan-add&olt=lab&vlan=100&uplinks=0/3/0", nil, nil)
	envelope(t, a, "vlan-add", 200)
	if a.body["note"] == nil {
		t.Errorf("no note after a write: %s", a.raw)
	}
	// With the plan: added, note, event.
	a = r.do(t, "POST", "/olt/ont-add", map[string]any{"port": simPort, "sn": simSN, "vlan": 100, "plan": "gold", "description": "flat 7"}, nil)
	envelope(t, a, "ont-add", 200)
	if a.body["note"] == nil {
		t.Errorf("no note after a write: %s", a.raw)
	}
	res := a.body["result"].(map[string]any)
	if res["port"] != simPort || res["sn"] != simSN || res["vlan"] != float64(100) {
		t.Errorf("ont-add result %v", res)
	}
	// The plan's rate x1.10 (made by ont-add, or already by the
	// background plan sync the plan's creation started).
	tables := r.do(t, "POST", "/olt/profiles", map[string]any{}, nil)
	down := -1
	for _, x := range tables.body["result"].(map[string]any)["traffic_tables"].([]any) {
		if tt := x.(map[string]any); tt["cir"] == float64(110000) {
			down = int(tt["index"].(float64))
		}
	}
	if down < 0 || !strings.Contains(a.raw, fmt.Sprintf("outbound traffic-table index %d", down)) {
		t.Errorf("plan rate x1.10 (table %d) not used: %s", down, a.raw)
	}
	a = r.do(t, "POST", "/olt/onus", map[string]any{"port": simPort}, nil)
	envelope(t, a, "onus", 200)
	if !strings.Contains(a.raw, simSN) {
		t.Errorf("onus lacks the ONT: %s", a.raw)
	}
	a = r.do(t, "POST", "/olt/serviceports", map[string]any{}, nil)
	envelope(t, a, "serviceports", 200)
	if a.body["result"].(map[string]any)["count"] != float64(1) {
		t.Errorf("serviceports %s", a.raw)
	}
	// save: no note; save has no dry run.
	a = r.do(t, "POST", "/olt/save", map[string]any{}, nil)
	envelope(t, a, "save", 200)
	if _, ok := a.body["note"]; ok {
		t.Error("note after save")
	}
	want(t, r.do(t, "POST", "/olt/save", map[string]any{"dry_run": true}, nil), 400)
	// run refuses anything but display.
	want(t, r.do(t, "POST", "/olt/run", map[string]any{"command": "undo vlan 100"}, nil), 400)
	envelope(t, r.do(t, "POST", "/olt/run", map[string]any{"command": "display board 0"}, nil), "run", 200)
	// An OLT failure is a 502 envelope with error and raw.
	a = r.do(t, "POST", "/olt/ont-del", map[string]any{"port": simPort, "ont_id": 77, "force": true}, nil)
	if a.status != 502 && a.status != 200 {
		t.Errorf("ont-del of a missing ONT: %s", a.raw)
	}
	// The write was published, with no credentials.
	var ops []string
	for {
		m, err := sub.NextMsg(200 * time.Millisecond)
		if err != nil {
			break
		}
		if bytes.Contains(m.Data, []byte(simPass)) {
			t.Errorf("event holds the password: %s", m.Data)
		}
		var ev struct {
			Kind string
			Data struct{ Op string }
		}
		_ = json.Unmarshal(m.Data, &ev)
		ops = append(ops, ev.Kind+":"+ev.Data.Op)
	}
	if w := []string{"olt.write:vlan-add", "olt.write:ont-add", "ont.added:", "olt.write:save"}; !slices.Equal(ops, w) {
		t.Errorf("events %v, want %v (no event for a dry run, a refusal or a failure)", ops, w)
	}
	if strings.Contains(r.logs.String(), simPass) {
		t.Error("the logs hold the password")
	}
	if !strings.Contains(r.logs.String(), "op=ont-add olt=lab") {
		t.Error("the write was not logged with its op and OLT")
	}
}

// A write waits for the OLT's etcd write lock, which another replica may
// hold: writes to one OLT run one at a time across replicas.
func TestWriteWaitsForTheOLTLock(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	lock, err := store.Acquire(context.Background(), r.env.KV, "olt/"+r.simHost)
	if err != nil {
		t.Fatal(err)
	}
	const hold = 700 * time.Millisecond
	go func() { time.Sleep(hold); lock.Unlock(context.Background()) }() // the other replica's write
	begin := time.Now()
	a := r.do(t, "POST", "/olt/sysname", map[string]any{"name": "LOCKED-1"}, nil)
	envelope(t, a, "sysname", 200)
	if d := time.Since(begin); d < hold {
		t.Errorf("the write ran after %v, while the lock was held for %v", d, hold)
	}
	// Reads do not wait for it.
	lock, err = store.Acquire(context.Background(), r.env.KV, "olt/"+r.simHost)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock(context.Background())
	envelope(t, r.do(t, "POST", "/olt/info", map[string]any{"timeout": 10}, nil), "info", 200)
}

// Registry credentials never come from a URL either; a POSTed action's
// JSON body may carry them.
func TestRegistryCredentialsNotFromURL(t *testing.T) {
	r := start(t)
	q := url.Values{"name": {"a"}, "host": {"10.0.0.1"}, "user": {"u"}, "pass": {"p"}}
	a := r.do(t, "POST", "/olts?"+q.Encode(), map[string]any{}, nil)
	want(t, a, 400)
	q.Set("action", "olts-add")
	want(t, r.do(t, "GET", "/api?"+q.Encode(), nil, nil), 400)
	a = r.do(t, "POST", "/api?action=olts-add", map[string]any{"name": "a", "host": "10.0.0.1", "user": "u", "pass": "p"}, nil)
	want(t, a, 201)
	want(t, r.do(t, "GET", "/api?action=olts-set&name=a&comment=rack+3", nil, nil), 200)
	want(t, r.do(t, "GET", "/api?action=olts-set&name=a&password=x", nil, nil), 400)
	// An OLT operation by a POSTed action with one-off credentials in its body.
	a = r.do(t, "POST", "/api?action=olt-info", map[string]any{"host": r.simHost, "port": r.simPort, "user": simUser, "pass": simPass}, nil)
	envelope(t, a, "info", 200)
}
