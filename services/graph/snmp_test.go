package graph_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/services/graph"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// snmpRig is the graph service on testenv's etcd and NATS with its agent in a
// namespace of the test's own; net-snmp's clients run inside it.
type snmpRig struct {
	t     *testing.T
	env   *testenv.Env
	ns    *netns.NS
	port  int
	state string
	stop  func()
}

func newSNMPRig(t *testing.T) *snmpRig {
	t.Helper()
	for _, c := range []string{"snmpget", "snmpwalk", "snmpbulkwalk", "snmpset"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s not installed (Debian package snmp)", c)
		}
	}
	r := &snmpRig{t: t, env: testenv.Start(t), ns: testenv.Netns(t), port: 16100, state: t.TempDir()}
	testenv.Run(t, r.ns, "ip", "link", "set", "lo", "up")
	r.start()
	return r
}

// start runs the service until stop (or the test's end) and waits until
// it answers on the bus.
func (r *snmpRig) start() {
	t := r.t
	t.Helper()
	svc := graph.New(graph.Deps{NC: r.env.NC, KV: r.env.KV, NS: r.ns, StateDir: r.state, SNMPPort: r.port, Log: testenv.Log(t)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	r.stop = func() { cancel(); <-done }
	t.Cleanup(func() { r.stop() })
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, r.env.NC, graph.Name); missing != nil {
		t.Fatalf("not up: %v", missing)
	}
}

// call sends an operation as the gateway would and returns the status and
// the raw answer.
func (r *snmpRig) call(op api.Operation, body any) (int, string) {
	r.t.Helper()
	m := op.Describe()
	method := "POST"
	if m.Read {
		method = "GET"
	}
	raw, _ := json.Marshal(body)
	rep, err := bus.Call(context.Background(), r.env.NC, m.Subject(), &pb.Request{Method: method, Args: raw, Caller: "127.0.0.1", By: "tester"})
	if err != nil {
		r.t.Fatalf("%s: %v", m.Name, err)
	}
	return rep.Status, string(rep.Body)
}

func (r *snmpRig) status() map[string]any {
	r.t.Helper()
	st, body := r.call(api.SNMPStatus, nil)
	if st != 200 {
		r.t.Fatalf("GET /snmp: %d %s", st, body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

// snmp runs a net-snmp command inside the namespace: one try, 1 s (for
// what must not be answered).
func (r *snmpRig) snmp(cmd, community, target string, args ...string) (string, error) {
	return r.snmpTries(cmd, community, target, "0", args...)
}

func (r *snmpRig) snmpTries(cmd, community, target, retries string, args ...string) (string, error) {
	full := append([]string{"--net=" + r.ns.Path(), cmd, "-v2c", "-c", community, "-t", "1", "-r", retries, "-On", "-m", "", target}, args...)
	out, err := exec.Command("nsenter", full...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// must runs a net-snmp command that must succeed: three tries of 1 s, so
// a loaded machine does not make a lost datagram a failure.
func (r *snmpRig) must(cmd, community, target string, args ...string) string {
	r.t.Helper()
	out, err := r.snmpTries(cmd, community, target, "2", args...)
	if err != nil {
		r.t.Fatalf("%s %v: %v\n%s", cmd, args, err, out)
	}
	return out
}

func (r *snmpRig) v4() string { return "udp:127.0.0.1:" + strconv.Itoa(r.port) }
func (r *snmpRig) v6() string { return "udp6:[::1]:" + strconv.Itoa(r.port) }

const testCommunity = "ro-Test_1.2:x"

func TestSNMPAgent(t *testing.T) {
	r := newSNMPRig(t)

	// No testCommunity: off, nothing answers.
	st := r.status()
	if st["enabled"] != "no" || st["running"] != false || st["community_set"] != false {
		t.Fatalf("before any setting: %v", st)
	}

	// Bad communities are 400s naming testCommunity, and change nothing.
	for _, bad := range []string{"has space", "semi;colon", strings.Repeat("a", 65), "ümlaut"} {
		code, body := r.call(api.SNMPSetOp, map[string]any{"community": bad, "location": "nowhere"})
		if code != 400 || !strings.Contains(body, `"field":"community"`) {
			t.Errorf("testCommunity %q: %d %s", bad, code, body)
		}
	}
	if st := r.status(); st["community_set"] != false || st["sys_location"] != "" {
		t.Fatalf("a refused change changed the settings: %v", st)
	}

	code, body := r.call(api.SNMPSetOp, map[string]any{"community": testCommunity, "location": "Rack 4, POP North", "contact": "noc@example.net"})
	if code != 200 || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("POST /snmp: %d %s", code, body)
	}
	if strings.Contains(body, testCommunity) {
		t.Fatalf("the answer shows the testCommunity: %s", body)
	}
	_, raw := r.call(api.SNMPStatus, nil)
	if strings.Contains(raw, testCommunity) {
		t.Fatalf("GET /snmp shows the testCommunity: %s", raw)
	}
	st = r.status()
	want := fmt.Sprintf("udp:%d, udp6:%d", r.port, r.port)
	if st["running"] != true || st["enabled"] != "yes" || st["community_set"] != true || st["listen"] != want || st["sys_location"] != "Rack 4, POP North" {
		t.Fatalf("after POST: %v", st)
	}

	t.Run("get", func(t *testing.T) {
		for _, target := range []string{r.v4(), r.v6()} {
			out := r.must("snmpget", testCommunity, target, "1.3.6.1.2.1.1.1.0", "1.3.6.1.2.1.1.6.0", "1.3.6.1.2.1.1.4.0", "1.3.6.1.2.1.1.2.0")
			for _, w := range []string{"routerd", `"Rack 4, POP North"`, "noc@example.net", ".1.3.6.1.4.1.32473.1"} {
				if !strings.Contains(out, w) {
					t.Errorf("%s: no %q in\n%s", target, w, out)
				}
			}
		}
		out := r.must("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.1", "1.3.6.1.2.1.99.1.0", "1.3.6.1.2.1.1.3.0")
		if !strings.Contains(out, "No Such Instance") || !strings.Contains(out, "No Such Object") || !strings.Contains(out, "Timeticks") {
			t.Errorf("exceptions:\n%s", out)
		}
		out = r.must("snmpgetnext", testCommunity, r.v4(), "1.3.6.1.4.1.32473.9")
		if !strings.Contains(out, "No more variables left in this MIB View") {
			t.Errorf("past the end:\n%s", out)
		}
	})

	t.Run("wrong community", func(t *testing.T) {
		before := r.status()["bad_community"].(float64)
		if out, err := r.snmp("snmpget", "not-the-community", r.v4(), "1.3.6.1.2.1.1.1.0"); err == nil || !strings.Contains(out, "Timeout") {
			t.Fatalf("a wrong testCommunity was answered: %v %s", err, out)
		}
		if after := r.status()["bad_community"].(float64); after <= before {
			t.Errorf("bad_community %v -> %v", before, after)
		}
	})

	t.Run("set refused", func(t *testing.T) {
		out, err := r.snmp("snmpset", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0", "s", "changed")
		if err == nil || !strings.Contains(out, "notWritable") {
			t.Fatalf("snmpset: %v %s", err, out)
		}
		if out := r.must("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0"); !strings.Contains(out, "Rack 4") {
			t.Fatalf("sysLocation after a refused set: %s", out)
		}
	})

	t.Run("interfaces", func(t *testing.T) {
		far := testenv.Netns(t)
		snmpVeth(t, r.ns, far, "snmpv0", "10.99.0.1/24", "10.99.0.2/24")
		idx := snmpIfIndex(t, r.ns, "snmpv0")
		// The link dump is kept a second: the new link shows within it.
		testenv.Eventually(t, 5*time.Second, func() error {
			names := r.must("snmpwalk", testCommunity, r.v4(), "1.3.6.1.2.1.2.2.1.2")
			if !strings.Contains(names, fmt.Sprintf(`.1.3.6.1.2.1.2.2.1.2.%d = STRING: "snmpv0"`, idx)) || !strings.Contains(names, `STRING: "lo"`) {
				return fmt.Errorf("ifDescr walk:\n%s", names)
			}
			return nil
		})
		hc := fmt.Sprintf("1.3.6.1.2.1.31.1.1.1.10.%d", idx) // ifHCOutOctets
		c32 := fmt.Sprintf("1.3.6.1.2.1.2.2.1.16.%d", idx)   // ifOutOctets
		before := snmpCounter(t, r.must("snmpget", testCommunity, r.v4(), hc))
		before32 := snmpCounter(t, r.must("snmpget", testCommunity, r.v4(), c32))
		testenv.Run(t, r.ns, "ping", "-c", "5", "-i", "0.2", "-W", "1", "-s", "1000", "10.99.0.2")
		testenv.Eventually(t, 5*time.Second, func() error {
			after := snmpCounter(t, r.must("snmpget", testCommunity, r.v4(), hc))
			after32 := snmpCounter(t, r.must("snmpget", testCommunity, r.v4(), c32))
			if after < before+5000 || after32 < before32+5000 {
				return fmt.Errorf("ifHCOutOctets %d -> %d, ifOutOctets %d -> %d after 5 pings of 1000 bytes", before, after, before32, after32)
			}
			return nil
		})
		// The whole IF-MIB by GetBulk: every interface's row in each
		// table.
		bulk := r.must("snmpbulkwalk", testCommunity, r.v4(), "-Cr25", "1.3.6.1.2.1.31.1.1.1.1")
		if !strings.Contains(bulk, fmt.Sprintf(`.1.3.6.1.2.1.31.1.1.1.1.%d = STRING: "snmpv0"`, idx)) {
			t.Fatalf("ifName bulk walk:\n%s", bulk)
		}
		// A veth's driver gives 10,000 Mb/s: ifHighSpeed in Mb/s, ifSpeed
		// in bit/s held at its maximum.
		speed := r.must("snmpget", testCommunity, r.v4(), fmt.Sprintf("1.3.6.1.2.1.31.1.1.1.15.%d", idx), fmt.Sprintf("1.3.6.1.2.1.2.2.1.5.%d", idx))
		if !strings.Contains(speed, "Gauge32: 10000\n") || !strings.Contains(speed, "Gauge32: 4294967295") {
			t.Errorf("veth speed:\n%s", speed)
		}
		walk := r.must("snmpwalk", testCommunity, r.v4(), "1.3.6.1.2.1.2")
		bulkAll := r.must("snmpbulkwalk", testCommunity, r.v4(), "-Cr7", "1.3.6.1.2.1.2")
		if snmpLines(walk) < 16*2 || snmpLines(walk) != snmpLines(bulkAll) {
			t.Fatalf("walk %d lines, bulk walk %d:\n%s", snmpLines(walk), snmpLines(bulkAll), bulkAll)
		}
	})

	t.Run("sample", func(t *testing.T) {
		names := map[string]bool{}
		for _, s := range r.status()["sample"].([]any) {
			names[s.(map[string]any)["name"].(string)+"="+s.(map[string]any)["value"].(string)] = true
		}
		if !names["sysLocation.0=Rack 4, POP North"] || !names["routerdClientCount.0=0"] {
			t.Fatalf("sample: %v", names)
		}
	})

	t.Run("restart keeps the settings", func(t *testing.T) {
		r.stop()
		if _, err := r.snmp("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0"); err == nil {
			t.Fatal("the agent answers after its service stopped")
		}
		r.start()
		testenv.Eventually(t, 5*time.Second, func() error {
			out, err := r.snmp("snmpget", testCommunity, r.v6(), "1.3.6.1.2.1.1.6.0")
			if err != nil || !strings.Contains(out, "Rack 4") {
				return fmt.Errorf("%v %s", err, out)
			}
			return nil
		})
		if st := r.status(); st["running"] != true || st["sys_contact"] != "noc@example.net" {
			t.Fatalf("after restart: %v", st)
		}
	})

	t.Run("omitted fields keep their value", func(t *testing.T) {
		if code, body := r.call(api.SNMPSetOp, map[string]any{"location": "Rack 5"}); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		out := r.must("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0", "1.3.6.1.2.1.1.4.0")
		if !strings.Contains(out, "Rack 5") || !strings.Contains(out, "noc@example.net") {
			t.Fatalf("%s", out)
		}
		if code, body := r.call(api.SNMPSetOp, map[string]any{"community": "second"}); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		if _, err := r.snmp("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0"); err == nil {
			t.Fatal("the old testCommunity is still answered")
		}
		r.must("snmpget", "second", r.v4(), "1.3.6.1.2.1.1.6.0")
	})
}

// TestSNMPPortTaken: an agent that cannot bind is a 500 with the reason
// and the previous settings are back; once the port is free it starts.
func TestSNMPPortTaken(t *testing.T) {
	r := newSNMPRig(t)
	var held net.PacketConn
	if err := r.ns.Do(func() (err error) {
		held, err = net.ListenPacket("udp4", "0.0.0.0:"+strconv.Itoa(r.port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	code, body := r.call(api.SNMPSetOp, map[string]any{"community": testCommunity, "location": "here"})
	if code != 500 || !strings.Contains(body, `"detail"`) || !strings.Contains(body, "address already in use") {
		t.Fatalf("POST with the port taken: %d %s", code, body)
	}
	if strings.Contains(body, testCommunity) {
		t.Fatalf("the answer shows the testCommunity: %s", body)
	}
	if st := r.status(); st["running"] != false || st["community_set"] != false || st["sys_location"] != "" {
		t.Fatalf("after a failed start: %v", st)
	}
	held.Close()
	if code, body := r.call(api.SNMPSetOp, map[string]any{"community": testCommunity, "location": "here"}); code != 200 {
		t.Fatalf("POST with the port free: %d %s", code, body)
	}
	r.must("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0")
}

// TestSNMPConfigDocument: etc/snmp.json carries the testCommunity sealed;
// importing it back (as a restore does) serves the same testCommunity, and a
// document in clear is sealed on the way in.
func TestSNMPConfigDocument(t *testing.T) {
	r := newSNMPRig(t)
	if code, body := r.call(api.SNMPSetOp, map[string]any{"community": testCommunity, "location": "A"}); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	ctx := context.Background()
	docs, err := bus.Invoke(ctx, r.env.NC, api.SNMPConfig.Export, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	doc := docs.Documents[graph.SNMPDocument]
	if strings.Contains(doc, testCommunity) || !strings.Contains(doc, `"community": "v1:`) || !strings.Contains(doc, `"location": "A"`) {
		t.Fatalf("etc/snmp.json:\n%s", doc)
	}
	// The same community again keeps its sealed form: saved versions do
	// not differ by a fresh nonce.
	if code, _ := r.call(api.SNMPSetOp, map[string]any{"community": testCommunity}); code != 200 {
		t.Fatal(code)
	}
	if again, _ := bus.Invoke(ctx, r.env.NC, api.SNMPConfig.Export, &api.None{}); again.Documents[graph.SNMPDocument] != doc {
		t.Fatalf("the same settings exported differently:\n%s\n%s", doc, again.Documents[graph.SNMPDocument])
	}
	if code, _ := r.call(api.SNMPSetOp, map[string]any{"community": "other", "location": "B"}); code != 200 {
		t.Fatal(code)
	}
	if _, err := bus.Invoke(ctx, r.env.NC, api.SNMPConfig.Import, &api.ConfigDocuments{Documents: map[string]string{graph.SNMPDocument: doc}}); err != nil {
		t.Fatal(err)
	}
	if out := r.must("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0"); !strings.Contains(out, `"A"`) {
		t.Fatalf("after import: %s", out)
	}
	// A hand-written document with the testCommunity in clear.
	if _, err := bus.Invoke(ctx, r.env.NC, api.SNMPConfig.Import, &api.ConfigDocuments{Documents: map[string]string{graph.SNMPDocument: `{"community": "clear-one", "location": "C", "contact": ""}`}}); err != nil {
		t.Fatal(err)
	}
	r.must("snmpget", "clear-one", r.v4(), "1.3.6.1.2.1.1.6.0")
	docs, _ = bus.Invoke(ctx, r.env.NC, api.SNMPConfig.Export, &api.None{})
	if strings.Contains(docs.Documents[graph.SNMPDocument], "clear-one") {
		t.Fatalf("stored in clear: %s", docs.Documents[graph.SNMPDocument])
	}
	// A broken document is a 400 and changes nothing.
	if _, err := bus.Invoke(ctx, r.env.NC, api.SNMPConfig.Import, &api.ConfigDocuments{Documents: map[string]string{graph.SNMPDocument: `{"community": "bad one"}`}}); err == nil {
		t.Fatal("an invalid testCommunity was imported")
	}
	r.must("snmpget", "clear-one", r.v4(), "1.3.6.1.2.1.1.6.0")
}

// snmpLines counts the variables net-snmp printed (not the line of an
// endOfMibView that ends a walk).
func snmpLines(s string) int {
	n := 0
	for l := range strings.SplitSeq(strings.TrimSpace(s), "\n") {
		if l != "" && !strings.Contains(l, "No more variables left") {
			n++
		}
	}
	return n
}

// counter reads the number of "... = Counter64: 123" (or Counter32).
func snmpCounter(t *testing.T, out string) uint64 {
	t.Helper()
	i := strings.LastIndex(out, ": ")
	n, err := strconv.ParseUint(strings.TrimSpace(out[i+2:]), 10, 64)
	if err != nil {
		t.Fatalf("not a counter: %q", out)
	}
	return n
}

func snmpIfIndex(t *testing.T, ns *netns.NS, name string) int {
	t.Helper()
	h, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}

// veth links ns (name, a) and far (name+"p", b), both up.
func snmpVeth(t *testing.T, ns, far *netns.NS, name, a, b string) {
	t.Helper()
	h, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	fh, err := far.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: name + "p"}); err != nil {
		t.Skipf("kernel test: veth not available: %v", err)
	}
	p, err := h.LinkByName(name + "p")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.LinkSetNsFd(p, far.FD()); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		h       *netlink.Handle
		name, a string
	}{{h, name, a}, {fh, name + "p", b}} {
		l, err := x.h.LinkByName(x.name)
		if err != nil {
			t.Fatal(err)
		}
		ad, _ := netlink.ParseAddr(x.a)
		ad.Flags = 0x02 // IFA_F_NODAD
		if err := x.h.AddrAdd(l, ad); err != nil {
			t.Fatal(err)
		}
		if err := x.h.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
}

// standIn serves ops on the bus as service name until the returned stop:
// the subscribers' clients.page and the shaper's counters.page, whose
// contracts (proto/api) the per-client table is read through. (The real
// services need dhcp, netcfg and tc around them; e2e TestLabSNMP reads the
// table from the real ones.)
func standIn(t *testing.T, r *snmpRig, name string, eps ...bus.Endpoint) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		bus.Run(ctx, r.env.NC, bus.ServiceConfig{Name: name, Version: "0.0.0", Log: testenv.Log(t), Endpoints: eps})
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, r.env.NC, name); missing != nil {
		t.Fatalf("%s stand-in not up", name)
	}
	return stop
}

// TestSNMPClientTable: the per-client table is read from the clients'
// pages and joined with the shaper's counters on the MAC; a client the
// shaper does not count, and every client while the shaper does not
// answer, has no counter cells (never a zero made up).
func TestSNMPClientTable(t *testing.T) {
	r := newSNMPRig(t)
	plan := "gold"
	clients := []api.Client{
		{MAC: "02:00:00:00:00:01", IP: "10.0.0.1", Hostname: "cpe-1", Plan: &plan},
		{MAC: "02:00:00:00:00:02", IP: "10.0.0.2", Hostname: "cpe-2"},
		{MAC: "02:00:00:00:00:03", IP: "10.0.0.3", Hostname: "cpe-3", Plan: &plan},
	}
	var pages atomic.Int32
	standIn(t, r, "subscribers", bus.Bind(api.ClientsPage, func(_ context.Context, in *api.ClientPageRequest) (*api.ClientPage, error) {
		pages.Add(1)
		// Two a page, to make the reader follow Next.
		var out api.ClientPage
		for _, c := range clients {
			if c.MAC > in.After && len(out.Clients) < 2 {
				out.Clients = append(out.Clients, c)
			}
		}
		if out.Count = len(out.Clients); out.Count == 2 && out.Clients[1].MAC != clients[len(clients)-1].MAC {
			out.Next = out.Clients[1].MAC
		}
		return &out, nil
	}))
	stopShaper := standIn(t, r, "shaper", bus.Bind(api.ShaperCounters, func(_ context.Context, in *api.ShapePageRequest) (*api.ShapeCounterPage, error) {
		out := &api.ShapeCounterPage{At: time.Now()}
		if in.After == "" {
			out.Counters = []api.ShapeCounter{{ID: "02:00:00:00:00:01", DownBytes: 123456789012, UpBytes: 42}, {ID: "svc-fibre-7", DownBytes: 5}, {ID: "02:00:00:00:00:03", DownBytes: 7, UpBytes: 8}}
		}
		out.Count = len(out.Counters)
		return out, nil
	}))
	if code, body := r.call(api.SNMPSetOp, map[string]any{"community": testCommunity}); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	table := "1.3.6.1.4.1.32473.2.2"
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := r.status()["per_client_count"]; n != float64(3) {
			return fmt.Errorf("per_client_count %v", n)
		}
		return nil
	})
	walk := r.must("snmpbulkwalk", testCommunity, r.v4(), table)
	for _, w := range []string{
		`.1.3.6.1.4.1.32473.2.2.1.3.2.0.0.0.0.2 = STRING: "cpe-2"`,
		`.1.3.6.1.4.1.32473.2.2.1.2.2.0.0.0.0.3 = IpAddress: 10.0.0.3`,
		`.1.3.6.1.4.1.32473.2.2.1.4.2.0.0.0.0.1 = STRING: "gold"`,
		`.1.3.6.1.4.1.32473.2.2.1.5.2.0.0.0.0.1 = Counter64: 123456789012`,
		`.1.3.6.1.4.1.32473.2.2.1.6.2.0.0.0.0.3 = Counter64: 8`,
	} {
		if !strings.Contains(walk, w) {
			t.Errorf("no %s in\n%s", w, walk)
		}
	}
	if strings.Contains(walk, ".5.2.0.0.0.0.2 ") || strings.Contains(walk, ".6.2.0.0.0.0.2 ") || snmpLines(walk) != 4*3+2*2 {
		t.Errorf("the unshaped client has counters, or the rows are not 4x3 + 2x2 cells:\n%s", walk)
	}
	if pages.Load() < 2 {
		t.Errorf("%d clients.page calls: the second page was not read", pages.Load())
	}
	if out := r.must("snmpget", testCommunity, r.v4(), "1.3.6.1.4.1.32473.2.1.0"); !strings.Contains(out, "Gauge32: 3") {
		t.Errorf("client count: %s", out)
	}

	// Without the shaper the rows stay and the counter columns go. The
	// table is read at the agent's start: restart the service.
	stopShaper()
	r.stop()
	r.start()
	testenv.Eventually(t, 15*time.Second, func() error {
		if c := r.status()["counters"].(string); !strings.HasPrefix(c, "left out") {
			return fmt.Errorf("counters: %s", c)
		}
		return nil
	})
	walk = r.must("snmpbulkwalk", testCommunity, r.v4(), table)
	if strings.Contains(walk, "Counter64") || snmpLines(walk) != 4*3 {
		t.Fatalf("without the shaper:\n%s", walk)
	}
}

// TestSNMPAtStart: the service starts the agent from what is stored; when
// the port is taken it says why and binds once the port is free; when the
// sealed community does not open (the key file is another one) it stays
// off, says why, and a new community brings it back.
func TestSNMPAtStart(t *testing.T) {
	r := newSNMPRig(t)
	if code, body := r.call(api.SNMPSetOp, map[string]any{"community": testCommunity, "location": "L"}); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	r.stop()
	var held net.PacketConn
	if err := r.ns.Do(func() (err error) {
		held, err = net.ListenPacket("udp4", "0.0.0.0:"+strconv.Itoa(r.port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	r.start()
	testenv.Eventually(t, 5*time.Second, func() error {
		if st := r.status(); st["running"] != false || st["enabled"] != "yes" || !strings.Contains(st["problem"].(string), "cannot listen") {
			return fmt.Errorf("with the port taken: %v", st)
		}
		return nil
	})
	held.Close()
	testenv.Eventually(t, 15*time.Second, func() error { // tried again every 10 s
		if st := r.status(); st["running"] != true || st["problem"] != "" {
			return fmt.Errorf("after the port was freed: %v", st)
		}
		return nil
	})
	r.must("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0")

	r.stop()
	r.state = t.TempDir() // another key file
	r.start()
	testenv.Eventually(t, 5*time.Second, func() error {
		if st := r.status(); st["running"] != false || st["enabled"] != "yes" || !strings.Contains(st["problem"].(string), "does not open") || st["sys_location"] != "L" {
			return fmt.Errorf("with another key: %v", st)
		}
		return nil
	})
	if _, err := r.snmp("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0"); err == nil {
		t.Fatal("answered with a community that does not open")
	}
	if code, body := r.call(api.SNMPSetOp, map[string]any{"community": testCommunity}); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	r.must("snmpget", testCommunity, r.v4(), "1.3.6.1.2.1.1.6.0")
}
