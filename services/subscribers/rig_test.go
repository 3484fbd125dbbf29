package subscribers_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"routerd.dev/gateway"
	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp"
	"routerd.dev/services/subscribers"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

const apiKey = "test-key"

// clock is a settable time for the end-date tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// effects stands in, on the bus, for the shaper and the firewall until
// those services are in the tree: it binds their operations (the contract
// of proto/api/shaper.go and firewall.go) and keeps what it was asked, so
// the tests see each call and can make one refuse. DHCP is the real dhcp
// service.
type effects struct {
	mu     sync.Mutex
	shapes map[string]api.Shape
	blocks map[string]api.Block
	rates  []api.PlanRates
	refuse map[string]bool // shaper, firewall
	// lateRates makes the next plans.rates apply the rates and then
	// answer that the shaper is unavailable (an answer lost or late).
	lateRates bool
	calls     int
	removed   []string
}

func (e *effects) refusing(what string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls++
	if e.refuse[what] {
		return apierr.Internal("tc: refused by the test", "cannot apply")
	}
	return nil
}

func (e *effects) shape(id string) (api.Shape, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.shapes[id]
	return s, ok
}

func (e *effects) blocked(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.blocks[id]
	return ok
}

func (e *effects) endpointsShaper() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.ShaperSet, func(ctx context.Context, s *api.Shape) (*api.ShapeAnswer, error) {
			if err := e.refusing("shaper"); err != nil {
				return nil, err
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			_, had := e.shapes[s.ID]
			e.shapes[s.ID] = *s
			a := &api.ShapeAnswer{Shape: s}
			if had {
				a.Code = 200
			}
			return a, nil
		}),
		bus.Bind(api.ShaperRemove, func(ctx context.Context, r *api.ShapeRef) (*api.ShapeAnswer, error) {
			if err := e.refusing("shaper"); err != nil {
				return nil, err
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if _, ok := e.shapes[r.ID]; !ok {
				return nil, apierr.NotFound("not shaped: %s", r.ID)
			}
			delete(e.shapes, r.ID)
			e.removed = append(e.removed, "shape "+r.ID)
			return &api.ShapeAnswer{}, nil
		}),
		bus.Bind(api.ShaperPlan, func(ctx context.Context, r *api.PlanRates) (*api.PlanRatesAnswer, error) {
			if err := e.refusing("shaper"); err != nil {
				return nil, err
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			e.rates = append(e.rates, *r)
			n := 0
			for id, s := range e.shapes {
				if s.Plan == r.Plan {
					s.DownMbps, s.UpMbps = r.DownMbps, r.UpMbps
					e.shapes[id] = s
					n++
				}
			}
			if e.lateRates {
				e.lateRates = false
				return nil, apierr.Unavailable("the shaper service did not answer in time (the test)")
			}
			return &api.PlanRatesAnswer{Reshaped: n}, nil
		}),
		bus.Bind(api.ShaperPage, func(ctx context.Context, r *api.ShapePageRequest) (*api.ShapePage, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			var ids []string
			for id := range e.shapes {
				if id > r.After {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			out := &api.ShapePage{Shapes: []api.Shape{}}
			for i, id := range ids {
				if i == r.Limit {
					out.Next = ids[i-1]
					break
				}
				out.Shapes = append(out.Shapes, e.shapes[id])
			}
			out.Count = len(out.Shapes)
			return out, nil
		}),
	}
}

func (e *effects) endpointsFirewall() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.FirewallBlock, func(ctx context.Context, b *api.Block) (*api.BlockAnswer, error) {
			if err := e.refusing("firewall"); err != nil {
				return nil, err
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			e.blocks[b.ID] = *b
			return &api.BlockAnswer{Block: b}, nil
		}),
		bus.Bind(api.FirewallUnblock, func(ctx context.Context, r *api.BlockRef) (*api.BlockAnswer, error) {
			if err := e.refusing("firewall"); err != nil {
				return nil, err
			}
			e.mu.Lock()
			defer e.mu.Unlock()
			if _, ok := e.blocks[r.ID]; !ok {
				return nil, apierr.NotFound("not blocked: %s", r.ID)
			}
			delete(e.blocks, r.ID)
			return &api.BlockAnswer{}, nil
		}),
		bus.Bind(api.FirewallBlocks, func(ctx context.Context, r *api.BlockPageRequest) (*api.BlockPage, error) {
			e.mu.Lock()
			defer e.mu.Unlock()
			var ids []string
			for id := range e.blocks {
				if id > r.After {
					ids = append(ids, id)
				}
			}
			sort.Strings(ids)
			out := &api.BlockPage{Blocks: []api.Block{}}
			for i, id := range ids {
				if i == r.Limit {
					out.Next = ids[i-1]
					break
				}
				out.Blocks = append(out.Blocks, e.blocks[id])
			}
			out.Count = len(out.Blocks)
			return out, nil
		}),
	}
}

// rig is a gateway in front of the subscribers service, the real dhcp
// service serving a veth in an anonymous namespace, and the stand-ins for
// the shaper and the firewall.
type rig struct {
	url   string
	env   *testenv.Env
	ns    *netns.NS
	fx    *effects
	clock *clock
	iface string // served, 10.50.0.1/24 and 2001:db8:50::1/64
	other string // an address (10.60.0.1/24) DHCP does not serve

	stopSubs func()
	subsDeps subscribers.Deps
	svc      *subscribers.Service
}

// realOwners, set by real_test.go, starts the real owners of the clients'
// effects it is built with in the namespace and says which (the others
// are the stand-ins).
var realOwners func(t testing.TB, env *testenv.Env, ns *netns.NS, log *slog.Logger, run func(func(context.Context) error)) (shaper, firewall bool)

// expiryEvery is the end-date period of the rigs (benchmarks lengthen it).
var expiryEvery = 200 * time.Millisecond

func startRig(t testing.TB) *rig { return newRig(t, false) }

// startRealRig is startRig with the real shaper and firewall services in
// the namespace instead of the stand-ins.
func startRealRig(t testing.TB) *rig { return newRig(t, true) }

func newRig(t testing.TB, real bool) *rig {
	t.Helper()
	env := testenv.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	if err := bus.EnsureStream(ctx, env.NC); err != nil {
		t.Fatal(err)
	}
	ns := testenv.Netns(t)
	r := &rig{env: env, ns: ns, iface: "sub0", other: "oth0",
		fx:    &effects{shapes: map[string]api.Shape{}, blocks: map[string]api.Block{}, refuse: map[string]bool{}},
		clock: &clock{t: time.Date(2026, 11, 23, 10, 0, 0, 0, time.Local)}}
	testenv.Run(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
	testenv.Run(t, ns, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
	testenv.Run(t, ns, "ip", "link", "set", "lo", "up")
	for _, pair := range [][2]string{{r.iface, "sub1"}, {r.other, "oth1"}} {
		testenv.Run(t, ns, "ip", "link", "add", pair[0], "type", "veth", "peer", "name", pair[1])
		testenv.Run(t, ns, "ip", "link", "set", pair[0], "up")
		testenv.Run(t, ns, "ip", "link", "set", pair[1], "up")
	}
	testenv.Run(t, ns, "ip", "addr", "add", "10.50.0.1/24", "dev", r.iface)
	testenv.Run(t, ns, "ip", "-6", "addr", "add", "2001:db8:50::1/64", "dev", r.iface, "nodad")
	testenv.Run(t, ns, "ip", "addr", "add", "10.60.0.1/24", "dev", r.other)

	log := testenv.Log(t)
	var wg sync.WaitGroup
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); f(ctx) }()
	}
	// A delegation pool whose first 16 /56s are the band pinned to
	// single clients (POST /pd/assign).
	pd := dhcp.PDDefaults{Pool: netip.MustParsePrefix("2001:db8:a000::/48"), Len: 56, Slice: 16, Reserve: 16}
	d, err := dhcp.NewService(dhcp.ServiceDeps{NC: env.NC, KV: env.KV, NS: ns, Log: log, ListenRetry: 200 * time.Millisecond, PD: pd})
	if err != nil {
		t.Fatal(err)
	}
	run(d.Run)
	realShaper, realFirewall := false, false
	if real {
		if realOwners == nil {
			t.Skip("the real owners are not built into this test (real_test.go)")
		}
		realShaper, realFirewall = realOwners(t, env, ns, log, run)
	}
	if !realShaper {
		run(func(ctx context.Context) error {
			return bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "shaper", Version: "0.0.0", Log: log, Endpoints: r.fx.endpointsShaper()})
		})
	}
	if !realFirewall {
		run(func(ctx context.Context) error {
			return bus.Run(ctx, env.NC, bus.ServiceConfig{Name: "firewall", Version: "0.0.0", Log: log, Endpoints: r.fx.endpointsFirewall()})
		})
	}
	r.subsDeps = subscribers.Deps{NC: env.NC, KV: env.KV, Log: log, Now: r.clock.Now, NS: ns, ExpiryEvery: expiryEvery}
	r.startSubscribers(t)
	gw, err := gateway.New(gateway.Config{APIKey: apiKey, NC: env.NC, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	run(func(ctx context.Context) error { return gw.Serve(ctx, l) })
	r.url = "http://" + l.Addr().String()
	t.Cleanup(func() { r.stopSubs(); cancel(); wg.Wait() })
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, "dhcp", "shaper", "firewall", subscribers.Name); missing != nil {
		t.Fatalf("not registered: %v", missing)
	}
	// Serve the first interface (POST /net).
	if st, m := r.do(t, "POST", "/net", map[string]any{"iface": r.iface}); st != 201 {
		t.Fatalf("POST /net: %d %v", st, m)
	}
	if st, m := r.do(t, "POST", "/net6", map[string]any{"iface": r.iface}); st != 201 {
		t.Fatalf("POST /net6: %d %v", st, m)
	}
	return r
}

// startSubscribers (re)starts the subscribers service.
func (r *rig) startSubscribers(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	svc := subscribers.New(r.subsDeps)
	r.svc = svc
	done := make(chan struct{})
	go func() { svc.Run(ctx); close(done) }()
	r.stopSubs = func() { cancel(); <-done }
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, r.env.NC, subscribers.Name); missing != nil {
		t.Fatal("subscribers did not register")
	}
}

// do sends one request through the gateway and decodes the JSON answer.
func (r *rig) do(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return testenv.Call(t, apiKey, method, r.url+path, body)
}

// reservation reads dhcp's reservation of mac ("" when none).
func (r *rig) reservation(t testing.TB, mac string) string {
	t.Helper()
	l, err := bus.Invoke(context.Background(), r.env.NC, api.ReservationsList, &api.ReservationFilter{Kind: "clients", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range l.Clients {
		if c.MAC == mac {
			return fmt.Sprintf("%s %s %s", c.IP, c.IPv6, c.Hostname)
		}
	}
	return ""
}

func field(m map[string]any, path ...string) any {
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[p]
	}
	return v
}

var errNot = errors.New("not yet")

func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		if !cond() {
			return fmt.Errorf("%w: %s", errNot, what)
		}
		return nil
	})
}

var _ = strings.Contains
