package subscribers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/services/subscribers"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// TestClientsThroughTheGateway drives every form of POST /clients, the
// reads, POST /plan, /suspend, /resume, /expires, DELETE /clients and the
// plan rules through the gateway, with the real dhcp service holding the
// reservations.
func TestClientsThroughTheGateway(t *testing.T) {
	r := startRig(t)
	for _, p := range []map[string]any{{"name": "gold", "down_mbps": 20, "up_mbps": 10}, {"name": "silver", "down_mbps": 50, "up_mbps": 5}} {
		if st, m := r.do(t, "POST", "/plans", p); st != 201 {
			t.Fatalf("plan: %d %v", st, m)
		}
	}

	// 201: the MAC in any form, stored upper-case with colons; the
	// defaults; the interface's network, gateway and IPv6 network.
	st, m := r.do(t, "POST", "/clients", map[string]any{"mac": "aa-bb-cc-00-00-01", "ip": "10.50.0.10"})
	if st != 201 || m["message"] != "Client added" {
		t.Fatalf("add: %d %v", st, m)
	}
	want := map[string]any{"mac": "AA:BB:CC:00:00:01", "ip": "10.50.0.10", "ipv6": nil, "plan": nil, "suspended": false, "auto_suspended": false,
		"expires": nil, "hostname": "client-AABBCC000001", "network": "10.50.0.0/24", "network6": "2001:db8:50::/64", "iface": r.iface,
		"gateway": "10.50.0.1", "comment": "", "created": "2026-11-23 10:00:00"}
	if diff := cmp.Diff(want, m["client"]); diff != "" {
		t.Errorf("client (-want +got):\n%s", diff)
	}
	if got := r.reservation(t, "AA:BB:CC:00:00:01"); got != "10.50.0.10  client-AABBCC000001" {
		t.Errorf("reservation: %q", got)
	}
	if _, shaped := r.fx.shape("AA:BB:CC:00:00:01"); shaped || r.fx.blocked("AA:BB:CC:00:00:01") {
		t.Errorf("a client without plan or suspension was shaped or blocked")
	}
	// Every field, a plan: shaped at the plan's rates.
	st, m = r.do(t, "POST", "/clients", map[string]any{"mac": "aabbcc000002", "ip": "10.50.0.11", "ipv6": "2001:db8:50::11",
		"hostname": "CPE-Two", "comment": "flat 3", "plan": "gold", "expires": "2027-01-31"})
	if st != 201 || field(m, "client", "plan") != "gold" || field(m, "client", "ipv6") != "2001:db8:50::11" || field(m, "client", "expires") != "2027-01-31" {
		t.Fatalf("add with plan: %d %v", st, m)
	}
	if s, ok := r.fx.shape("AA:BB:CC:00:00:02"); !ok || s != (api.Shape{ID: "AA:BB:CC:00:00:02", IP: "10.50.0.11", Prefix6: "2001:db8:50::11", Iface: r.iface, Plan: "gold", DownMbps: 20, UpMbps: 10}) {
		t.Errorf("shape: %+v %v", s, ok)
	}
	if got := r.reservation(t, "AA:BB:CC:00:00:02"); got != "10.50.0.11 2001:db8:50::11 CPE-Two" {
		t.Errorf("reservation: %q", got)
	}
	// The action form, the third MAC form, the date with a time, none.
	st, m = r.do(t, "GET", "/api?action=add&"+url.Values{"mac": {"AA:BB:CC:00:00:03"}, "ip": {"10.50.0.12"}, "plan": {"none"}, "expires": {"2027-01-31 12:30"}}.Encode(), nil)
	if st != 201 || field(m, "client", "plan") != nil || field(m, "client", "expires") != "2027-01-31 12:30" {
		t.Fatalf("action add: %d %v", st, m)
	}

	// Refusals: nothing stored, nothing applied.
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
		field  string
		msg    string
	}{
		{"no mac", map[string]any{"ip": "10.50.0.20"}, 400, "mac", ""},
		{"bad mac", map[string]any{"mac": "aa:bb:cc:dd:ee", "ip": "10.50.0.20"}, 400, "mac", ""},
		{"no ip", map[string]any{"mac": "aa:bb:cc:00:00:20"}, 400, "ip", ""},
		{"ipv6 as ip", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "2001:db8:50::20"}, 400, "ip", ""},
		{"outside", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.99.0.20"}, 400, "ip", "outside the router's networks"},
		{"network address", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.0"}, 400, "ip", "network address"},
		{"gateway", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.1"}, 400, "ip", "gateway"},
		{"broadcast", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.255"}, 400, "ip", "broadcast"},
		{"ipv6 elsewhere", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "ipv6": "2001:db8:99::20"}, 400, "ipv6", "not on"},
		{"ipv6 gateway", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "ipv6": "2001:db8:50::1"}, 400, "ipv6", "gateway"},
		{"ipv6 without one", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.60.0.20", "ipv6": "2001:db8:50::20"}, 400, "ipv6", "no IPv6"},
		{"bad ipv6", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "ipv6": "10.50.0.21"}, 400, "ipv6", ""},
		{"bad hostname", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "hostname": "a_b"}, 400, "hostname", ""},
		{"long hostname", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "hostname": strings.Repeat("h", 64)}, 400, "hostname", ""},
		{"bad date", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "expires": "tomorrow"}, 400, "expires", "unreadable date"},
		{"unknown plan", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "plan": "bronze"}, 404, "", "No such plan"},
		{"duplicate ip", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.10"}, 409, "ip", "AA:BB:CC:00:00:01"},
		{"duplicate ipv6", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "ipv6": "2001:db8:50:0::11"}, 409, "ipv6", "AA:BB:CC:00:00:02"},
		{"duplicate hostname", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.50.0.20", "hostname": "cpe-two"}, 409, "hostname", "AA:BB:CC:00:00:02"},
		{"dhcp refuses", map[string]any{"mac": "aa:bb:cc:00:00:20", "ip": "10.60.0.20"}, 500, "", "rolled back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, m := r.do(t, "POST", "/clients", tc.body)
			if st != tc.status || (tc.field != "" && m["field"] != tc.field) || !strings.Contains(m["error"].(string), tc.msg) {
				t.Fatalf("%d %v, want %d field %q %q", st, m, tc.status, tc.field, tc.msg)
			}
			if st, _ := r.do(t, "GET", "/clients/AA:BB:CC:00:00:20", nil); st != 404 {
				t.Errorf("refused client stored: GET %d", st)
			}
		})
	}
	// The duplicate MAC carries the existing client.
	st, m = r.do(t, "POST", "/clients", map[string]any{"mac": "AA:BB:CC:00:00:01", "ip": "10.50.0.30"})
	if st != 409 || field(m, "existing", "ip") != "10.50.0.10" {
		t.Fatalf("duplicate mac: %d %v", st, m)
	}
	// Refused by DHCP, the address and hostname are free again.
	if st, m := r.do(t, "POST", "/clients", map[string]any{"mac": "aa:bb:cc:00:00:21", "ip": "10.50.0.20"}); st != 201 {
		t.Fatalf("address of a rolled-back client: %d %v", st, m)
	}
	// The shaper refusing: 500, the reservation taken out again too.
	r.fx.mu.Lock()
	r.fx.refuse["shaper"] = true
	r.fx.mu.Unlock()
	st, m = r.do(t, "POST", "/clients", map[string]any{"mac": "aa:bb:cc:00:00:22", "ip": "10.50.0.22", "plan": "gold"})
	r.fx.mu.Lock()
	r.fx.refuse["shaper"] = false
	r.fx.mu.Unlock()
	if st != 500 || field(m, "detail") == nil {
		t.Fatalf("shaper refusing: %d %v", st, m)
	}
	if got := r.reservation(t, "AA:BB:CC:00:00:22"); got != "" {
		t.Errorf("reservation left after the shaper refused: %q", got)
	}
	if st, _ := r.do(t, "GET", "/clients/10.50.0.22", nil); st != 404 {
		t.Errorf("client stored after the shaper refused")
	}

	// Reads.
	for _, key := range []string{"aa:bb:cc:00:00:02", "AABBCC000002", "aa-bb-cc-00-00-02", "10.50.0.11", "2001:db8:50:0:0:0:0:11", "cpe-TWO"} {
		if st, m := r.do(t, "GET", "/clients/"+url.PathEscape(key), nil); st != 200 || field(m, "client", "mac") != "AA:BB:CC:00:00:02" {
			t.Errorf("GET /clients/%s: %d %v", key, st, m)
		}
	}
	if st, m := r.do(t, "GET", "/clients/nobody", nil); st != 404 || m["error"] == nil {
		t.Errorf("GET unknown: %d %v", st, m)
	}
	if st, m := r.do(t, "GET", "/api?action=get&mac=10.50.0.12", nil); st != 200 || field(m, "client", "mac") != "AA:BB:CC:00:00:03" {
		t.Errorf("action get: %d %v", st, m)
	}
	list := func(q string) []string {
		t.Helper()
		st, m := r.do(t, "GET", q, nil)
		if st != 200 {
			t.Fatalf("%s: %d %v", q, st, m)
		}
		var macs []string
		for _, c := range m["clients"].([]any) {
			macs = append(macs, c.(map[string]any)["mac"].(string))
		}
		if int(m["count"].(float64)) != len(macs) {
			t.Errorf("%s: count %v for %d", q, m["count"], len(macs))
		}
		return macs
	}
	all := []string{"AA:BB:CC:00:00:01", "AA:BB:CC:00:00:02", "AA:BB:CC:00:00:03", "AA:BB:CC:00:00:21"}
	for q, want := range map[string][]string{
		"/clients":                              all,
		"/clients?network=10.50.0.0/24":         all,
		"/clients?network=10.50.0.8/30":         {"AA:BB:CC:00:00:01", "AA:BB:CC:00:00:02"},
		"/clients?network=10.60.0.0/24":         nil,
		"/clients?q=FLAT":                       {"AA:BB:CC:00:00:02"},
		"/clients?q=cpe-t":                      {"AA:BB:CC:00:00:02"},
		"/clients?q=db8:50::11":                 {"AA:BB:CC:00:00:02"},
		"/clients?q=aa-bb-cc-00-00-03":          {"AA:BB:CC:00:00:03"},
		"/clients?q=" + r.iface:                 all,
		"/api?action=search&q=10.50.0.12":       {"AA:BB:CC:00:00:03"},
		"/api?action=list&network=10.50.0.0/28": {"AA:BB:CC:00:00:01", "AA:BB:CC:00:00:02", "AA:BB:CC:00:00:03"},
	} {
		if diff := cmp.Diff(want, list(q)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", q, diff)
		}
	}
	if st, m := r.do(t, "GET", "/clients?network=nonsense", nil); st != 400 || m["field"] != "network" {
		t.Errorf("bad network: %d %v", st, m)
	}

	// POST /plan: reshaped at once; none removes the limit.
	if st, m := r.do(t, "POST", "/plan", map[string]any{"mac": "aa:bb:cc:00:00:01", "plan": "silver"}); st != 200 || m["plan"] != "silver" || m["mac"] != "AA:BB:CC:00:00:01" {
		t.Fatalf("set-plan: %d %v", st, m)
	}
	if s, ok := r.fx.shape("AA:BB:CC:00:00:01"); !ok || s.DownMbps != 50 || s.UpMbps != 5 || s.Plan != "silver" {
		t.Errorf("shape after set-plan: %+v", s)
	}
	if st, m := r.do(t, "GET", "/api?action=set-plan&mac=AA:BB:CC:00:00:01&plan=none", nil); st != 200 || m["plan"] != nil {
		t.Fatalf("set-plan none: %d %v", st, m)
	}
	if _, ok := r.fx.shape("AA:BB:CC:00:00:01"); ok {
		t.Errorf("still shaped after plan none")
	}
	if st, _ := r.do(t, "POST", "/plan", map[string]any{"mac": "aa:bb:cc:00:00:01", "plan": "bronze"}); st != 404 {
		t.Errorf("unknown plan: %d", st)
	}
	if st, _ := r.do(t, "POST", "/plan", map[string]any{"mac": "aa:bb:cc:00:00:99", "plan": "gold"}); st != 404 {
		t.Errorf("unknown client: %d", st)
	}

	// Plans: the list counts clients; new rates reshape every client of
	// the plan at once; a plan in use cannot go.
	_, m = r.do(t, "GET", "/plans", nil)
	if n := field(m["plans"].([]any)[0].(map[string]any), "clients"); n != float64(1) {
		t.Errorf("gold's clients: %v", n)
	}
	if st, m := r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 30, "up_mbps": 15}); st != 200 {
		t.Fatalf("plan replace: %d %v", st, m)
	}
	if s, _ := r.fx.shape("AA:BB:CC:00:00:02"); s.DownMbps != 30 || s.UpMbps != 15 {
		t.Errorf("not reshaped by the plan's new rates: %+v", s)
	}
	st, m = r.do(t, "DELETE", "/plans/gold", nil)
	if st != 409 || cmp.Diff([]any{"AA:BB:CC:00:00:02"}, m["clients"]) != "" {
		t.Errorf("delete plan in use: %d %v", st, m)
	}

	// Suspension: blocked; a manual suspend clears auto_suspended; resume.
	if st, m := r.do(t, "POST", "/suspend/aa:bb:cc:00:00:02", nil); st != 200 || m["suspended"] != true {
		t.Fatalf("suspend: %d %v", st, m)
	}
	if !r.fx.blocked("AA:BB:CC:00:00:02") {
		t.Errorf("not blocked after suspend")
	}
	if _, m := r.do(t, "GET", "/clients/AA:BB:CC:00:00:02", nil); field(m, "client", "suspended") != true {
		t.Errorf("stored: %v", m)
	}
	if st, m := r.do(t, "POST", "/resume", map[string]any{"mac": "aa:bb:cc:00:00:02"}); st != 200 || m["suspended"] != false {
		t.Fatalf("resume: %d %v", st, m)
	}
	if r.fx.blocked("AA:BB:CC:00:00:02") {
		t.Errorf("still blocked after resume")
	}
	if st, _ := r.do(t, "POST", "/suspend", map[string]any{"mac": "aa:bb:cc:00:00:99"}); st != 404 {
		t.Errorf("suspend unknown: %d", st)
	}
	// The firewall refusing a suspension: 500, nothing changed.
	r.fx.mu.Lock()
	r.fx.refuse["firewall"] = true
	r.fx.mu.Unlock()
	st, _ = r.do(t, "POST", "/suspend", map[string]any{"mac": "aa:bb:cc:00:00:02"})
	r.fx.mu.Lock()
	r.fx.refuse["firewall"] = false
	r.fx.mu.Unlock()
	if _, m := r.do(t, "GET", "/clients/AA:BB:CC:00:00:02", nil); st != 500 || field(m, "client", "suspended") != false {
		t.Errorf("firewall refusing: %d, stored %v", st, m)
	}

	// End dates: a past one suspends (auto) at once after POST /expires;
	// a manual suspend clears auto; never resumes an auto-suspended one.
	st, m = r.do(t, "POST", "/expires", map[string]any{"mac": "aa:bb:cc:00:00:03", "expires": "2026-11-22"})
	if st != 200 || m["suspended"] != true || m["expires"] != "2026-11-22" {
		t.Fatalf("expires past: %d %v", st, m)
	}
	if _, m := r.do(t, "GET", "/clients/AA:BB:CC:00:00:03", nil); field(m, "client", "auto_suspended") != true || !r.fx.blocked("AA:BB:CC:00:00:03") {
		t.Errorf("after a past end date: %v", m)
	}
	if st, m := r.do(t, "GET", "/api?action=set-expires&mac=AA:BB:CC:00:00:03&expires=never", nil); st != 200 || m["suspended"] != false || m["expires"] != nil {
		t.Fatalf("expires never: %d %v", st, m)
	}
	if r.fx.blocked("AA:BB:CC:00:00:03") {
		t.Errorf("still blocked after never")
	}
	if st, m := r.do(t, "POST", "/expires", map[string]any{"mac": "aa:bb:cc:00:00:03", "expires": "soon"}); st != 400 || m["field"] != "expires" {
		t.Errorf("unreadable date: %d %v", st, m)
	}
	r.do(t, "POST", "/expires", map[string]any{"mac": "aa:bb:cc:00:00:03", "expires": "2026-11-22"})
	r.do(t, "POST", "/suspend", map[string]any{"mac": "aa:bb:cc:00:00:03"})
	if _, m := r.do(t, "GET", "/clients/AA:BB:CC:00:00:03", nil); field(m, "client", "auto_suspended") != false || field(m, "client", "suspended") != true {
		t.Errorf("manual suspend of an auto-suspended client: %v", m)
	}
	// A manual suspension stays whatever the end date.
	r.do(t, "POST", "/expires", map[string]any{"mac": "aa:bb:cc:00:00:03", "expires": "never"})
	if _, m := r.do(t, "GET", "/clients/AA:BB:CC:00:00:03", nil); field(m, "client", "suspended") != true {
		t.Errorf("a manual suspension was lifted by an end date: %v", m)
	}
	// A client added with a past end date is suspended from the start.
	st, m = r.do(t, "POST", "/clients", map[string]any{"mac": "aa:bb:cc:00:00:04", "ip": "10.50.0.14", "expires": "2026-01-01"})
	if st != 201 || field(m, "client", "auto_suspended") != true || !r.fx.blocked("AA:BB:CC:00:00:04") {
		t.Errorf("added expired: %d %v", st, m)
	}

	// /status's counts.
	counts, err := bus.Invoke(context.Background(), r.env.NC, api.ClientsSummary, &api.None{})
	if err != nil || counts.Total != 5 || counts.PerNetwork["10.50.0.0/24"] != 5 {
		t.Errorf("summary: %+v %v", counts, err)
	}

	// DELETE: the answer carries the client and dhcp; everything removed.
	st, m = r.do(t, "DELETE", "/clients/aa-bb-cc-00-00-02", nil)
	if st != 200 || field(m, "client", "mac") != "AA:BB:CC:00:00:02" || field(m, "dhcp", "ok") != true {
		t.Fatalf("delete: %d %v", st, m)
	}
	if _, ok := r.fx.shape("AA:BB:CC:00:00:02"); ok || r.reservation(t, "AA:BB:CC:00:00:02") != "" {
		t.Errorf("shape or reservation left after delete")
	}
	if st, _ := r.do(t, "DELETE", "/clients/aa-bb-cc-00-00-02", nil); st != 404 {
		t.Errorf("second delete: %d", st)
	}
	if st, m := r.do(t, "DELETE", "/clients", nil); st != 400 || m["field"] != "mac" {
		t.Errorf("delete without mac: %d %v", st, m)
	}
	// Its plan can go now, and its address and hostname are free.
	if st, m := r.do(t, "DELETE", "/plans/gold", nil); st != 200 {
		t.Errorf("delete unused plan: %d %v", st, m)
	}
	if st, m := r.do(t, "POST", "/clients", map[string]any{"mac": "aa:bb:cc:00:00:05", "ip": "10.50.0.11", "hostname": "cpe-two"}); st != 201 {
		t.Errorf("reuse: %d %v", st, m)
	}
	if st, m := r.do(t, "GET", "/api?action=delete&mac=AA:BB:CC:00:00:04", nil); st != 200 {
		t.Errorf("action delete: %d %v", st, m)
	}
	if r.fx.blocked("AA:BB:CC:00:00:04") {
		t.Errorf("block left after delete")
	}

	// Events, replayed from the stream.
	js, _ := jetstream.New(r.env.NC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, event.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{event.Subject("subscribers", "client.>")}})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for {
		msg, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			break
		}
		var ev event.Event
		_ = json.Unmarshal(msg.Data(), &ev)
		kinds[ev.Kind]++
	}
	for _, k := range []string{api.ClientAdded, api.ClientDeleted, api.ClientReshaped, api.ClientSuspended, api.ClientResumed, api.ClientChanged} {
		if kinds[k] == 0 {
			t.Errorf("no %s event (%v)", k, kinds)
		}
	}
}

// TestClientsAreReconciledAtStart: what an owner lacks is given back, what
// it holds for no client is taken away, and an end date that passed while
// the service was down is applied at start; every 5 minutes (here 200 ms)
// the end dates are looked at again.
func TestClientsAreReconciledAtStart(t *testing.T) {
	r := startRig(t)
	ctx := context.Background()
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 20, "up_mbps": 10})
	for _, c := range []map[string]any{
		{"mac": "02:00:00:00:00:01", "ip": "10.50.0.101", "plan": "gold"},
		{"mac": "02:00:00:00:00:02", "ip": "10.50.0.102", "expires": "2026-11-24"},
		{"mac": "02:00:00:00:00:03", "ip": "10.50.0.103"},
	} {
		if st, m := r.do(t, "POST", "/clients", c); st != 201 {
			t.Fatalf("add: %d %v", st, m)
		}
	}
	if st, m := r.do(t, "POST", "/suspend", map[string]any{"mac": "02:00:00:00:00:03"}); st != 200 {
		t.Fatal(st, m)
	}
	r.stopSubs()
	// While it is down: effects lost, strays left, an end date passes.
	if _, err := bus.Invoke(ctx, r.env.NC, api.ReservationDelete, &api.ReservationRef{MAC: "02:00:00:00:00:01"}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Invoke(ctx, r.env.NC, api.ReservationPutClient, &api.ClientReservation{MAC: "02:00:00:00:00:99", IP: "10.50.0.199"}); err != nil {
		t.Fatal(err)
	}
	r.fx.mu.Lock()
	delete(r.fx.shapes, "02:00:00:00:00:01")
	delete(r.fx.blocks, "02:00:00:00:00:03")
	r.fx.shapes["02:00:00:00:00:98"] = api.Shape{ID: "02:00:00:00:00:98", IP: "10.50.0.198", Iface: r.iface, Plan: "gold", DownMbps: 1, UpMbps: 1}
	r.fx.shapes["svc_00000001"] = api.Shape{ID: "svc_00000001", IP: "10.50.0.197", Iface: r.iface, Plan: "gold", DownMbps: 1, UpMbps: 1}
	r.fx.blocks["02:00:00:00:00:97"] = api.Block{ID: "02:00:00:00:00:97", IP: "10.50.0.197"}
	r.fx.mu.Unlock()
	r.clock.Set(time.Date(2026, 11, 25, 0, 30, 0, 0, time.Local))
	r.startSubscribers(t)

	eventually(t, "reconciled", func() bool {
		_, shaped := r.fx.shape("02:00:00:00:00:01")
		_, stray := r.fx.shape("02:00:00:00:00:98")
		_, svc := r.fx.shape("svc_00000001")
		return shaped && !stray && svc && r.fx.blocked("02:00:00:00:00:03") && !r.fx.blocked("02:00:00:00:00:97") &&
			r.fx.blocked("02:00:00:00:00:02") && r.reservation(t, "02:00:00:00:00:01") != "" && r.reservation(t, "02:00:00:00:00:99") == ""
	})
	if _, m := r.do(t, "GET", "/clients/02:00:00:00:00:02", nil); field(m, "client", "auto_suspended") != true {
		t.Errorf("end date passed while down: %v", m)
	}
	// The periodic look: a later date resumes it by itself once stored
	// without asking for a reconcile (written as POST /expires would, but
	// the reconcile is the timer's).
	r.clock.Set(time.Date(2026, 11, 23, 0, 0, 0, 0, time.Local))
	eventually(t, "resumed by the periodic reconcile", func() bool { return !r.fx.blocked("02:00:00:00:00:02") })
	r.clock.Set(time.Date(2026, 11, 26, 0, 0, 0, 0, time.Local))
	eventually(t, "suspended by the periodic reconcile", func() bool { return r.fx.blocked("02:00:00:00:00:02") })
	_ = testenv.Log
}

// TestActiveClients6AndIPs reads the neighbour table of the router's
// namespace: entries made with ip neigh stand for what ARP and ND learn.
func TestActiveClients6AndIPs(t *testing.T) {
	r := startRig(t)
	for _, c := range []map[string]any{
		{"mac": "02:00:00:00:01:01", "ip": "10.50.0.21", "hostname": "online", "ipv6": "2001:db8:50::21"},
		{"mac": "02:00:00:00:01:02", "ip": "10.50.0.22", "hostname": "stale"},
		{"mac": "02:00:00:00:01:03", "ip": "10.50.0.23", "hostname": "away"},
	} {
		if st, m := r.do(t, "POST", "/clients", c); st != 201 {
			t.Fatalf("add: %d %v", st, m)
		}
	}
	neigh := func(args ...string) {
		testenv.Run(t, r.ns, "ip", append([]string{"neigh", "replace"}, args...)...)
	}
	neigh("10.50.0.21", "lladdr", "02:00:00:00:01:01", "dev", r.iface, "nud", "permanent")
	neigh("10.50.0.22", "lladdr", "02:00:00:00:01:99", "dev", r.iface, "nud", "stale") // answered by another MAC
	neigh("10.50.0.40", "lladdr", "02:00:00:00:02:40", "dev", r.iface, "nud", "reachable")
	neigh("2001:db8:50::21", "lladdr", "02:00:00:00:01:01", "dev", r.iface, "nud", "permanent")
	neigh("fe80::1:1", "lladdr", "02:00:00:00:01:01", "dev", r.iface, "nud", "permanent")
	neigh("2001:db8:50::77", "lladdr", "02:00:00:00:07:07", "dev", r.iface, "nud", "stale", "router")
	neigh("2001:db8:50::78", "lladdr", "02:00:00:00:07:08", "dev", r.iface, "nud", "reachable")

	st, m := r.do(t, "GET", "/clients/active", nil)
	if st != 200 {
		t.Fatalf("active: %d %v", st, m)
	}
	want := map[string]any{"registered": float64(3), "services": float64(0), "online": float64(1), "recent": float64(1), "offline": float64(1), "dynamic_active_leases": float64(0)}
	if diff := cmp.Diff(want, m["summary"]); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	byMAC := map[string]map[string]any{}
	for _, e := range m["clients"].([]any) {
		byMAC[e.(map[string]any)["mac"].(string)] = e.(map[string]any)
	}
	if e := byMAC["02:00:00:00:01:01"]; e["status"] != "online" || e["neigh_state"] != "PERMANENT" || e["mac_mismatch"] != false ||
		cmp.Diff([]any{"2001:db8:50::21"}, e["ipv6_actual"]) != "" || len(e["ipv6_all"].([]any)) != 2 {
		t.Errorf("online entry: %v", e)
	}
	if e := byMAC["02:00:00:00:01:02"]; e["status"] != "recent" || e["seen_mac"] != "02:00:00:00:01:99" || e["mac_mismatch"] != true {
		t.Errorf("stale entry: %v", e)
	}
	if e := byMAC["02:00:00:00:01:03"]; e["status"] != "offline" || e["neigh_state"] != "" {
		t.Errorf("offline entry: %v", e)
	}
	if st, m := r.do(t, "GET", "/api?action=connected&state=online", nil); st != 200 || m["count"] != float64(1) || field(m, "summary", "registered") != float64(3) {
		t.Errorf("connected online: %d %v", st, m)
	}
	if st, m := r.do(t, "GET", "/clients/active?state=gone", nil); st != 400 || m["field"] != "state" {
		t.Errorf("bad state: %d %v", st, m)
	}

	// clients.page: every client in MAC order, a page at a time.
	p1, err := bus.Invoke(context.Background(), r.env.NC, api.ClientsPage, &api.ClientPageRequest{Limit: 2})
	if err != nil || p1.Count != 2 || p1.Next != "02:00:00:00:01:02" || p1.Clients[0].MAC != "02:00:00:00:01:01" {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	p2, err := bus.Invoke(context.Background(), r.env.NC, api.ClientsPage, &api.ClientPageRequest{Limit: 2, After: p1.Next})
	if err != nil || p2.Count != 1 || p2.Next != "" || p2.Clients[0].MAC != "02:00:00:00:01:03" {
		t.Fatalf("page 2: %+v %v", p2, err)
	}
	if p, err := bus.Invoke(context.Background(), r.env.NC, api.ClientsPage, &api.ClientPageRequest{Iface: r.other}); err != nil || p.Count != 0 {
		t.Errorf("page of another interface: %+v %v", p, err)
	}

	// GET /clients carries what the neighbour table says of IPv6.
	_, m = r.do(t, "GET", "/clients?q=online", nil)
	if e := m["clients"].([]any)[0].(map[string]any); cmp.Diff([]any{"2001:db8:50::21"}, e["ipv6_actual"]) != "" || e["ipv6_state"] != "PERMANENT" ||
		len(e["ipv6_all"].([]any)) != 2 || e["prefix6_delegated"] == nil {
		t.Errorf("listed: %v", e)
	}

	// /status: online is the client whose address is a live neighbour.
	counts, err := bus.Invoke(context.Background(), r.env.NC, api.ClientsSummary, &api.None{})
	if err != nil || counts.Total != 3 || counts.Online != 1 {
		t.Errorf("summary: %+v %v", counts, err)
	}

	// /clients6: the router neighbour left out unless routers=1; the
	// router's own MACs never listed.
	st, m = r.do(t, "GET", "/clients6", nil)
	macs := func(m map[string]any) []string {
		var out []string
		for _, e := range m["clients"].([]any) {
			out = append(out, e.(map[string]any)["mac"].(string))
		}
		return out
	}
	if st != 200 || cmp.Diff([]string{"02:00:00:00:01:01", "02:00:00:00:07:08"}, macs(m)) != "" {
		t.Fatalf("clients6: %d %v", st, m)
	}
	e := m["clients"].([]any)[0].(map[string]any)
	if e["registered"] != true || e["ipv4"] != "10.50.0.21" || e["ipv6"] != "2001:db8:50::21" || e["link_local"] != "fe80::1:1" ||
		e["ipv6_reserved"] != "2001:db8:50::21" || e["online"] != true || e["router"] != false {
		t.Errorf("clients6 entry: %v", e)
	}
	if st, m := r.do(t, "GET", "/api?action=clients6&routers=1", nil); st != 200 || len(macs(m)) != 3 || field(m, "summary", "registered") != float64(1) {
		t.Errorf("clients6 routers=1: %d %v", st, m)
	}

	// /ips: usage of each network, 404 for one not on the router.
	st, m = r.do(t, "GET", "/ips?network=10.50.0.0/24", nil)
	if st != 200 || m["count"] != float64(1) {
		t.Fatalf("ips: %d %v", st, m)
	}
	n := m["networks"].([]any)[0].(map[string]any)
	if n["total_assignable"] != float64(253) || n["used_count"] != float64(3) || n["free_count"] != float64(250) || n["iface"] != r.iface ||
		cmp.Diff([]any{"10.50.0.2", "10.50.0.3", "10.50.0.4", "10.50.0.5", "10.50.0.6", "10.50.0.7", "10.50.0.8", "10.50.0.9", "10.50.0.10", "10.50.0.11"}, n["next_free"]) != "" ||
		cmp.Diff([]any{map[string]any{"ip": "10.50.0.40", "mac": "02:00:00:00:02:40", "neigh_state": "REACHABLE"}}, n["unregistered_seen"]) != "" {
		t.Errorf("ips network: %v", n)
	}
	if st, m := r.do(t, "GET", "/api?action=ip-info", nil); st != 200 || m["count"] != float64(2) {
		t.Errorf("ip-info: %d %v", st, m)
	}
	if st, _ := r.do(t, "GET", "/ips?network=10.99.0.0/24", nil); st != 404 {
		t.Errorf("ips of a network not here: %d", st)
	}
}

// TestConcurrentAddsAndPlanDelete: the unique values are held by etcd, not
// by a read before the write: of concurrent adds of one address exactly one
// wins, and a plan deleted while clients are added onto it either refuses
// (409) or leaves no client on a missing plan.
func TestConcurrentAddsAndPlanDelete(t *testing.T) {
	r := startRig(t)
	const n = 8
	codes := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			st, _ := r.do(t, "POST", "/clients", map[string]any{"mac": fmt.Sprintf("02:00:00:00:03:%02x", i), "ip": "10.50.0.33"})
			codes <- st
		}()
	}
	got := map[int]int{}
	for i := 0; i < n; i++ {
		got[<-codes]++
	}
	if got[201] != 1 || got[409] != n-1 {
		t.Errorf("concurrent adds of one address: %v", got)
	}
	for round := 0; round < 3; round++ {
		r.do(t, "POST", "/plans", map[string]any{"name": "race", "down_mbps": 5, "up_mbps": 5})
		done := make(chan int, 1)
		go func() {
			st, _ := r.do(t, "DELETE", "/plans/race", nil)
			done <- st
		}()
		st, _ := r.do(t, "POST", "/clients", map[string]any{"mac": fmt.Sprintf("02:00:00:00:04:%02x", round), "ip": fmt.Sprintf("10.50.0.%d", 60+round), "plan": "race"})
		del := <-done
		_, pm := r.do(t, "GET", "/plans", nil)
		exists := false
		for _, p := range pm["plans"].([]any) {
			if p.(map[string]any)["name"] == "race" {
				exists = true
			}
		}
		switch {
		case st == 201 && !exists:
			t.Fatalf("round %d: client added on plan race and the plan deleted (delete %d)", round, del)
		case st == 201 && del != 409:
			t.Fatalf("round %d: client added, plan delete answered %d", round, del)
		case st != 201 && st != 404:
			t.Fatalf("round %d: add answered %d", round, st)
		}
		if st == 201 {
			r.do(t, "DELETE", fmt.Sprintf("/clients/02:00:00:00:04:%02x", round), nil)
		}
	}
}

// TestClientsDocument: the clients are a configuration document
// (etc/clients.json) beside etc/plans.json; an import replaces them and
// their effects follow; a document breaking a rule changes nothing.
func TestClientsDocument(t *testing.T) {
	r := startRig(t)
	ctx := context.Background()
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 20, "up_mbps": 10})
	r.do(t, "POST", "/clients", map[string]any{"mac": "02:00:00:00:06:01", "ip": "10.50.0.61", "plan": "gold"})
	r.do(t, "POST", "/clients", map[string]any{"mac": "02:00:00:00:06:02", "ip": "10.50.0.62", "hostname": "two"})
	docs, err := bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Export, &api.None{})
	if err != nil || !strings.Contains(docs.Documents["etc/clients.json"], "02:00:00:00:06:02") || docs.Documents["etc/plans.json"] == "" {
		t.Fatalf("export: %+v %v", docs, err)
	}
	r.do(t, "DELETE", "/clients/02:00:00:00:06:01", nil)
	r.do(t, "POST", "/clients", map[string]any{"mac": "02:00:00:00:06:03", "ip": "10.50.0.63"})

	// A duplicate address in the document: 400, nothing changed.
	bad := strings.Replace(docs.Documents["etc/clients.json"], "10.50.0.62", "10.50.0.61", 1)
	_, err = bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Import, &api.ConfigDocuments{Documents: map[string]string{"etc/clients.json": bad}})
	if err == nil || !strings.Contains(err.Error(), "also held") {
		t.Fatalf("import of a duplicate: %v", err)
	}
	if st, _ := r.do(t, "GET", "/clients/02:00:00:00:06:03", nil); st != 200 {
		t.Errorf("a refused import changed the clients")
	}
	// The exported documents back: the deleted client and its effects
	// return, the one added since goes with its reservation.
	if _, err := bus.Invoke(ctx, r.env.NC, api.SubscribersConfig.Import, docs); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.do(t, "GET", "/clients/02:00:00:00:06:01", nil); st != 200 {
		t.Errorf("imported client missing")
	}
	if st, _ := r.do(t, "GET", "/clients/10.50.0.63", nil); st != 404 {
		t.Errorf("client not in the document still there")
	}
	eventually(t, "effects of the import", func() bool {
		_, shaped := r.fx.shape("02:00:00:00:06:01")
		return shaped && r.reservation(t, "02:00:00:00:06:01") != "" && r.reservation(t, "02:00:00:00:06:03") == ""
	})
	_, m := r.do(t, "GET", "/plans", nil)
	if n := field(m["plans"].([]any)[0].(map[string]any), "clients"); n != float64(1) {
		t.Errorf("gold's clients after import: %v", n)
	}
}

// TestTwoReplicas: two subscribers replicas share the requests (queue
// group); suspends and resumes of one client racing through both leave the
// firewall's block as the stored record says.
func TestTwoReplicas(t *testing.T) {
	r := startRig(t)
	second := subscribers.New(r.subsDeps)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { second.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if st, m := r.do(t, "POST", "/clients", map[string]any{"mac": "02:00:00:00:07:01", "ip": "10.50.0.71"}); st != 201 {
		t.Fatalf("add: %d %v", st, m)
	}
	for round := 0; round < 5; round++ {
		codes := make(chan int, 10)
		for i := 0; i < 10; i++ {
			path := "/suspend"
			if i%2 == 1 {
				path = "/resume"
			}
			go func() {
				st, _ := r.do(t, "POST", path, map[string]any{"mac": "02:00:00:00:07:01"})
				codes <- st
			}()
		}
		for i := 0; i < 10; i++ {
			if st := <-codes; st != 200 && st != 409 {
				t.Fatalf("round %d: %d", round, st)
			}
		}
		_, m := r.do(t, "GET", "/clients/02:00:00:00:07:01", nil)
		if stored := field(m, "client", "suspended") == true; stored != r.fx.blocked("02:00:00:00:07:01") {
			t.Fatalf("round %d: stored suspended=%v, blocked=%v", round, stored, !stored)
		}
	}
}
