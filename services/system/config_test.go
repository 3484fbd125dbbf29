package system_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	"routerd.dev/services/netcfg"
	"routerd.dev/services/subscribers"
	"routerd.dev/services/system"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

const key = "test-key"

// rig is the system service with real owners of configuration on one bus
// and one etcd keyspace, and the gateway in front.
type rig struct {
	t   *testing.T
	env *testenv.Env
	ns  *netns.NS
	url string
	ctx context.Context
}

// newRig runs subscribers (plans) and, when kernel is true, netcfg in an
// anonymous namespace with a port r0 (192.0.2.1/24); system asks those.
func newRig(t *testing.T, kernel bool, opts ...func(*system.Deps)) *rig {
	t.Helper()
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &rig{t: t, env: env, ctx: api.WithOrigin(context.Background(), api.Origin{Caller: "192.0.2.50", By: "noc"})}
	owners := []api.ConfigOwner{api.SubscribersConfig}
	names := []string{subscribers.Name, system.Name}
	sub := subscribers.New(subscribers.Deps{NC: env.NC, KV: env.KV, Log: testenv.Log(t)})
	go sub.Run(ctx)
	if kernel {
		r.ns = testenv.Netns(t)
		port(t, r.ns)
		nc, err := netcfg.New(netcfg.Deps{NC: env.NC, KV: env.KV, NS: r.ns, Log: testenv.Log(t)})
		if err != nil {
			t.Fatal(err)
		}
		go nc.Run(ctx)
		owners = append(owners, api.NetcfgConfig)
		names = append(names, netcfg.Name)
	}
	d := system.Deps{NC: env.NC, KV: env.KV, Log: testenv.Log(t), Owners: owners, StateDir: t.TempDir()}
	for _, o := range opts {
		o(&d)
	}
	go system.New(d).Run(ctx)
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, names...); len(missing) > 0 {
		t.Fatalf("services not up: %v", missing)
	}
	gw, err := gateway.New(gateway.Config{APIKey: key, NC: env.NC, Log: testenv.Log(t)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	r.url = srv.URL
	return r
}

func port(t *testing.T, ns *netns.NS) {
	t.Helper()
	nl, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	if err := nl.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "r0"}, PeerName: "r0p"}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	for _, n := range []string{"r0", "r0p"} {
		l, _ := nl.LinkByName(n)
		if err := nl.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := nl.LinkByName("r0")
	addr, _ := netlink.ParseAddr("192.0.2.1/24")
	if err := nl.AddrAdd(l, addr); err != nil {
		t.Fatal(err)
	}
}

// do sends one HTTP request and decodes the JSON answer.
func (r *rig) do(method, path string, body any) (int, map[string]any) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, r.url+path, rd)
	req.Header.Set("X-API-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &m); err != nil {
			r.t.Fatalf("%s %s: %v\n%s", method, path, err, raw)
		}
	}
	return resp.StatusCode, m
}

func (r *rig) action(method, name string, q url.Values, body any) (int, map[string]any) {
	r.t.Helper()
	if q == nil {
		q = url.Values{}
	}
	q.Set("action", name)
	return r.do(method, "/api?"+q.Encode(), body)
}

// expect runs an action and checks its status.
func (r *rig) expect(want int, method, name string, q url.Values, body any) map[string]any {
	r.t.Helper()
	status, m := r.action(method, name, q, body)
	if status != want {
		r.t.Fatalf("%s %s %v: status %d, want %d: %v", method, name, q, status, want, m)
	}
	return m
}

func strs(v any) []string {
	out := []string{}
	for _, e := range v.([]any) {
		out = append(out, e.(string))
	}
	return out
}

func plan(t *testing.T, r *rig, name string, down int) {
	t.Helper()
	if st, m := r.do("POST", "/plans", map[string]any{"name": name, "down_mbps": down, "up_mbps": 10}); st != 201 && st != 200 {
		t.Fatalf("plan %s: %d %v", name, st, m)
	}
}

// TestConfigVersions drives the five actions through the gateway: status
// before and after a save, the 405 of a GET save, body over query, the
// comment limit, versions' n, diff against running and between versions,
// show of a version and of one document, and the 400/404 answers.
func TestConfigVersions(t *testing.T) {
	r := newRig(t, false)
	st := r.expect(200, "GET", "config-status", nil, nil)
	if st["unsaved"] != true || st["saved"] != nil || st["latest"].(float64) != 0 {
		t.Fatalf("nothing saved yet: %v", st)
	}
	if got := strs(st["changes"].(map[string]any)["added"]); strings.Join(got, ",") != "etc/plans.json" {
		t.Fatalf("added %v", got)
	}

	// config-save: GET is 405 and saves nothing; POST saves (201).
	m := r.expect(405, "GET", "config-save", url.Values{"comment": {"x"}}, nil)
	if !strings.Contains(m["error"].(string), "POST") {
		t.Errorf("405 text: %v", m)
	}
	r.expect(400, "POST", "config-save", url.Values{"comment": {strings.Repeat("é", 201)}}, nil)
	r.expect(200, "GET", "config-versions", nil, nil)
	if v := r.expect(200, "GET", "config-versions", nil, nil); v["count"].(float64) != 0 {
		t.Fatalf("a refused save stored a version: %v", v)
	}
	plan(t, r, "gold", 500)
	m = r.expect(201, "POST", "config-save", url.Values{"comment": {"from query"}}, map[string]any{"comment": "from body", "by": "noc"})
	if m["version"].(float64) != 1 || m["files"].(float64) != 1 || m["ok"] != true || m["code"].(float64) != 201 {
		t.Fatalf("save answer %v", m)
	}
	saved := m["saved"].(map[string]any)
	if saved["comment"] != "from body" || saved["saved_by"] != "noc@127.0.0.1" || saved["auto"] != false ||
		len(saved["digest"].(string)) != 64 || saved["bytes"].(float64) < 10 {
		t.Fatalf("saved %v", saved)
	}
	// The query fills what the body lacks.
	m = r.expect(201, "POST", "config-save", url.Values{"comment": {strings.Repeat("é", 200)}, "by": {"ops"}}, map[string]any{})
	if m["saved"].(map[string]any)["comment"] != strings.Repeat("é", 200) {
		t.Fatalf("comment of 200 characters: %v", m)
	}

	st = r.expect(200, "GET", "config-status", nil, nil)
	if st["unsaved"] != false || st["latest"].(float64) != 2 || st["saved"].(map[string]any)["id"].(float64) != 2 {
		t.Fatalf("status after save: %v", st)
	}
	plan(t, r, "silver", 100)
	st = r.expect(200, "GET", "config-status", nil, nil)
	if st["unsaved"] != true || strings.Join(strs(st["changes"].(map[string]any)["changed"]), ",") != "etc/plans.json" {
		t.Fatalf("status after a change: %v", st)
	}

	// config-diff against running, and between versions.
	d := r.expect(200, "GET", "config-diff", url.Values{"from": {"1"}}, nil)
	if d["to"] != "running" || !strings.Contains(d["diff"].(string), `+            "name": "silver",`) ||
		!strings.HasPrefix(d["diff"].(string), "--- a/etc/plans.json") {
		t.Fatalf("diff to running: %v", d["diff"])
	}
	d = r.expect(200, "GET", "config-diff", url.Values{"from": {"1"}, "to": {"2"}}, nil)
	if d["diff"] != "" || d["to"].(float64) != 2 {
		t.Fatalf("equal versions: %v", d)
	}
	for _, q := range []url.Values{{}, {"from": {"abc"}}, {"from": {"1"}, "to": {"latest"}}} {
		m := r.expect(400, "GET", "config-diff", q, nil)
		if m["field"] != "from" && m["field"] != "to" {
			t.Errorf("%v: %v", q, m)
		}
	}
	r.expect(404, "GET", "config-diff", url.Values{"from": {"9"}}, nil)
	r.expect(404, "GET", "config-diff", url.Values{"from": {"1"}, "to": {"9"}}, nil)

	// config-show: the documents, one document, 404s, 400s.
	sh := r.expect(200, "GET", "config-show", url.Values{"id": {"1"}}, nil)
	files := sh["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["path"] != "etc/plans.json" || sh["version"].(map[string]any)["id"].(float64) != 1 {
		t.Fatalf("show: %v", sh)
	}
	sh = r.expect(200, "GET", "config-show", url.Values{"id": {"1"}, "path": {"etc/plans.json"}}, nil)
	if !strings.Contains(sh["content"].(string), `"name": "gold"`) || strings.Contains(sh["content"].(string), "silver") {
		t.Fatalf("show path: %v", sh["content"])
	}
	r.expect(404, "GET", "config-show", url.Values{"id": {"1"}, "path": {"etc/none.json"}}, nil)
	r.expect(404, "GET", "config-show", url.Values{"id": {"7"}}, nil)
	r.expect(400, "GET", "config-show", url.Values{"id": {"x"}}, nil)
	r.expect(400, "GET", "config-show", nil, nil)

	// config-versions: newest first, n's range.
	v := r.expect(200, "GET", "config-versions", url.Values{"n": {"1"}}, nil)
	if v["count"].(float64) != 1 || v["versions"].([]any)[0].(map[string]any)["id"].(float64) != 2 {
		t.Fatalf("versions n=1: %v", v)
	}
	v = r.expect(200, "GET", "config-versions", nil, nil)
	if v["count"].(float64) != 2 {
		t.Fatalf("versions: %v", v)
	}
	r.expect(400, "GET", "config-versions", url.Values{"n": {"0"}}, nil)
	r.expect(400, "GET", "config-versions", url.Values{"n": {"1001"}}, nil)
	r.expect(200, "GET", "config-versions", url.Values{"n": {"1000"}}, nil)
}

// TestConfigMasked: secrets in a stored document never appear in
// config-show or config-diff. No owner stores secrets yet, so the version is
// written through the versions store the way a save writes it.
func TestConfigMasked(t *testing.T) {
	r := newRig(t, false)
	plan(t, r, "gold", 500)
	r.expect(201, "POST", "config-save", nil, nil)
	secret := map[string]string{"etc/bgp.json": `{"peers": [{"name": "up1", "password": "bgp-md5-pw", "password_set": true}]}`,
		"etc/snmp.json": `{"community": "snmp-comm-ro"}`, "etc/api.json": `{"api_key": "api-key-123", "token": "tok-456"}`}
	st := system.VersionsOf(r.env.KV)
	if _, err := st.Save(r.ctx, secret, "test", "secrets", false); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"etc/bgp.json", "etc/snmp.json", "etc/api.json"} {
		sh := r.expect(200, "GET", "config-show", url.Values{"id": {"2"}, "path": {p}}, nil)
		for _, s := range []string{"bgp-md5-pw", "snmp-comm-ro", "api-key-123", "tok-456"} {
			if strings.Contains(sh["content"].(string), s) {
				t.Errorf("%s shown in %s: %s", s, p, sh["content"])
			}
		}
		if !strings.Contains(sh["content"].(string), "********") {
			t.Errorf("%s: no masked value: %s", p, sh["content"])
		}
	}
	for _, q := range []url.Values{{"from": {"1"}, "to": {"2"}}, {"from": {"2"}}} {
		d := r.expect(200, "GET", "config-diff", q, nil)
		for _, s := range []string{"bgp-md5-pw", "snmp-comm-ro", "api-key-123", "tok-456"} {
			if strings.Contains(d["diff"].(string), s) {
				t.Errorf("%s shown in the diff %v", s, q)
			}
		}
		if !strings.Contains(d["diff"].(string), "etc/bgp.json") {
			t.Errorf("diff %v lacks etc/bgp.json: %s", q, d["diff"])
		}
	}
}

// TestConfigBroken: a stored record that does not parse makes config-save
// and config-status a 500 listing it in broken_data_files, and a damaged
// version record the same for config-versions.
func TestConfigBroken(t *testing.T) {
	r := newRig(t, false)
	plan(t, r, "gold", 500)
	if _, err := r.env.KV.Put(context.Background(), "/router/subscribers/plans/bad", "{not json"); err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct{ method, name string }{{"POST", "config-save"}, {"GET", "config-status"}} {
		m := r.expect(500, a.method, a.name, nil, nil)
		b, _ := m["broken_data_files"].([]any)
		if len(b) != 1 || b[0] != "subscribers/plans/bad" {
			t.Errorf("%s: %v", a.name, m)
		}
	}
	if _, err := r.env.KV.Delete(context.Background(), "/router/subscribers/plans/bad"); err != nil {
		t.Fatal(err)
	}
	r.expect(201, "POST", "config-save", nil, nil)
	if _, err := r.env.KV.Put(context.Background(), "/router/system/versions/0000000001", "{"); err != nil {
		t.Fatal(err)
	}
	m := r.expect(500, "GET", "config-versions", nil, nil)
	if b, _ := m["broken_data_files"].([]any); len(b) != 1 || b[0] != "system/versions/0000000001" {
		t.Errorf("versions: %v", m)
	}
}

// TestConfigOwnerMissing: a service that owns documents but is not running
// makes a save a 503 naming it, and saves nothing.
func TestConfigOwnerMissing(t *testing.T) {
	r := newRig(t, false, func(d *system.Deps) { d.Owners = append(d.Owners, api.NetcfgConfig) })
	m := r.expect(503, "POST", "config-save", nil, nil)
	if m["service"] != "netcfg" {
		t.Errorf("%v", m)
	}
	if _, err := bus.Invoke(r.ctx, r.env.NC, api.ConfigVersions, &api.ConfigVersionsRequest{N: 30}); err != nil {
		t.Fatal(err)
	}
	v, err := bus.Invoke(r.ctx, r.env.NC, api.ConfigVersions, &api.ConfigVersionsRequest{N: 30})
	if err != nil || v.Count != 0 {
		t.Fatalf("%v %v", v, err)
	}
	_, err = bus.Invoke(r.ctx, r.env.NC, api.ConfigShow, &api.ConfigShowRequest{ID: 1})
	if ae := apierr.From(err); ae.Kind != apierr.KindNotFound {
		t.Errorf("show of a missing version: %v", err)
	}
}

// TestConfigAutoSave: another service's call saves an automatic version
// with the origin it carries.
func TestConfigAutoSave(t *testing.T) {
	r := newRig(t, false)
	plan(t, r, "gold", 100)
	a, err := bus.Invoke(r.ctx, r.env.NC, api.ConfigAutoSave, &api.ConfigAutoSaveRequest{Comment: "network apply"})
	if err != nil || a.Code != 201 || !a.Saved.Auto || a.Saved.SavedBy != "noc@192.0.2.50" || a.Saved.Comment != "network apply" {
		t.Fatalf("%+v %v", a, err)
	}
	if st := r.expect(200, "GET", "config-status", nil, nil); st["unsaved"] != false || st["latest"].(float64) != 1 {
		t.Errorf("status: %v", st)
	}
}
