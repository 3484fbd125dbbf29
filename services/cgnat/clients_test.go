package cgnat_test

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// standInClients serves clients.page on the bus from a list the test
// changes (the subscribers service's contract, proto/api/clients.go),
// two clients a page whatever the limit asked, to walk the pages.
type standInClients struct {
	mu      sync.Mutex
	clients map[string]api.Client
	// gate, when set, holds each page until it is closed (after the page
	// was read: the answer is as of the question).
	gate chan struct{}
	// asked is signalled at each question.
	asked chan struct{}
}

func (s *standInClients) page(_ context.Context, r *api.ClientPageRequest) (*api.ClientPage, error) {
	s.mu.Lock()
	out := s.pageLocked(r)
	gate, asked := s.gate, s.asked
	s.mu.Unlock()
	if asked != nil {
		select {
		case asked <- struct{}{}:
		default:
		}
	}
	if gate != nil {
		<-gate
	}
	return out, nil
}

func (s *standInClients) pageLocked(r *api.ClientPageRequest) *api.ClientPage {
	macs := make([]string, 0, len(s.clients))
	for m := range s.clients {
		if m > r.After {
			macs = append(macs, m)
		}
	}
	sort.Strings(macs)
	out := &api.ClientPage{Clients: []api.Client{}}
	for i, m := range macs {
		if i == 2 {
			out.Next = out.Clients[1].MAC
			break
		}
		out.Clients = append(out.Clients, s.clients[m])
	}
	out.Count = len(out.Clients)
	return out
}

// TestClientsAtStart: the slots follow the clients.page of the subscribers
// service at each start: new clients get slots in MAC order, a client gone
// while cgnat was down is released, a changed address followed, and a
// client present all along keeps its slot.
func TestClientsAtStart(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	env := testenv.Start(t)
	src := &standInClients{clients: map[string]api.Client{}}
	for _, c := range []api.Client{
		client("AA:00:00:00:00:03", "10.77.0.53", "c"),
		client("AA:00:00:00:00:01", "10.77.0.51", "a"),
		client("AA:00:00:00:00:02", "10.77.0.52", "b"),
	} {
		src.clients[c.MAC] = c
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "subscribers", Version: "0.0.0", Log: testenv.Log(t),
			Endpoints: []bus.Endpoint{bus.Bind(api.ClientsPage, src.page)}})
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, "subscribers"); missing != nil {
		t.Fatal("stand-in subscribers did not register")
	}
	r := newRigOn(t, ns, env)
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "203.0.113.1", "block_size": 1000})
	slotOf := func(ip string) any {
		_, m := r.do(t, "GET", "/cgnat", nil)
		for _, s := range m["sample"].([]any) {
			if s := s.(map[string]any); s["private_ip"] == ip {
				return s["slot"]
			}
		}
		return nil
	}
	testenv.WaitFor(t, 5*time.Second, "three slots", func() bool {
		_, m := r.do(t, "GET", "/cgnat", nil)
		return m["assigned"] == float64(3) && m["clients_synced"] == true
	})
	if slotOf("10.77.0.51") != float64(0) || slotOf("10.77.0.52") != float64(1) || slotOf("10.77.0.53") != float64(2) {
		t.Fatalf("not in MAC order: %v %v %v", slotOf("10.77.0.51"), slotOf("10.77.0.52"), slotOf("10.77.0.53"))
	}
	// While cgnat is down: a client goes, one changes its address, one
	// comes.
	r.stop()
	src.mu.Lock()
	delete(src.clients, "AA:00:00:00:00:01")
	src.clients["AA:00:00:00:00:02"] = client("AA:00:00:00:00:02", "10.77.0.62", "b")
	src.clients["AA:00:00:00:00:00"] = client("AA:00:00:00:00:00", "10.77.0.60", "new")
	src.mu.Unlock()
	r.start(t)
	testenv.WaitFor(t, 5*time.Second, "the clients followed", func() bool {
		return slotOf("10.77.0.51") == nil && slotOf("10.77.0.62") == float64(1) && slotOf("10.77.0.60") == float64(0)
	})
	if slotOf("10.77.0.53") != float64(2) {
		t.Fatalf("a client present all along moved: %v", slotOf("10.77.0.53"))
	}
	out := testenv.Run(t, ns, "nft", "list", "map", "ip", "routerd_cgnat", "cg_subs")
	if !has(out, "10.77.0.60 : 203.0.113.1 . 1024", "10.77.0.62 : 203.0.113.1 . 2024", "10.77.0.53 : 203.0.113.1 . 3024") || has(out, "10.77.0.51 ") || has(out, "10.77.0.52 ") {
		t.Fatalf("map after the restart:\n%s", out)
	}
	if a := r.auditText(t); !has(a, "release mac=AA:00:00:00:00:01 private=10.77.0.51", "release mac=AA:00:00:00:00:02 private=10.77.0.52",
		"assign mac=AA:00:00:00:00:02 private=10.77.0.62", "assign mac=AA:00:00:00:00:00 private=10.77.0.60 public=203.0.113.1 ports=1024-2023 slot=0") {
		t.Fatalf("audit:\n%s", a)
	}
}

// TestEventDuringPaging: a client added by an event while the start's
// page of clients (read before it) is on its way keeps its slot: the
// event is newer than the page.
func TestEventDuringPaging(t *testing.T) {
	ns := testenv.Netns(t)
	link(t, ns, "up0", "up0p", "198.18.0.2/30")
	env := testenv.Start(t)
	src := &standInClients{clients: map[string]api.Client{"AA:00:00:00:00:01": client("AA:00:00:00:00:01", "10.77.0.51", "a")},
		gate: make(chan struct{}), asked: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "subscribers", Version: "0.0.0", Log: testenv.Log(t),
			Endpoints: []bus.Endpoint{bus.Bind(api.ClientsPage, src.page)}})
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, "subscribers"); missing != nil {
		t.Fatal("stand-in subscribers did not register")
	}
	r := newRigOn(t, ns, env)
	select {
	case <-src.asked:
	case <-time.After(5 * time.Second):
		t.Fatal("the page was never asked")
	}
	r.want(t, 200, "POST", "/cgnat", map[string]any{"enabled": true, "iface": "up0", "pool": "203.0.113.1"})
	// The event: a client the page does not have yet.
	if err := r.svc.UpsertClient(ctx, client("AA:00:00:00:00:09", "10.77.0.59", "late")); err != nil {
		t.Fatal(err)
	}
	close(src.gate)
	testenv.WaitFor(t, 5*time.Second, "the page synced", func() bool {
		_, m := r.do(t, "GET", "/cgnat", nil)
		return m["clients_synced"] == true
	})
	if m := r.want(t, 200, "GET", "/cgnat", nil); m["assigned"] != float64(2) {
		t.Fatalf("after the sync: %v", m)
	}
	if out := testenv.Run(t, ns, "nft", "list", "map", "ip", "routerd_cgnat", "cg_subs"); !has(out, "10.77.0.59 : 203.0.113.1 . 1024", "10.77.0.51 : 203.0.113.1 . 3072") {
		t.Fatalf("map:\n%s", out)
	}
}
