package dhcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// runningService is a dhcp Service running on its own goroutine.
type runningService struct {
	svc    *Service
	cancel context.CancelFunc
	done   chan error
}

func startService(t *testing.T, env *testenv.Env, tp *topo) *runningService {
	t.Helper()
	svc, err := NewService(ServiceDeps{NC: env.NC, KV: env.KV, NS: tp.target(t), Log: testenv.Log(t), ListenRetry: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningService{svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- svc.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *runningService) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("service Run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("service did not stop")
	}
}

// waitServing waits (bounded) until the service's engine has its
// listeners open and the bus answers.
func (r *runningService) waitServing(t *testing.T, env *testenv.Env, listeners int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		r.svc.mu.Lock()
		eng := r.svc.eng
		r.svc.mu.Unlock()
		if eng == nil {
			return errors.New("dhcp service not serving: no engine")
		}
		if n := eng.listenerCount(); n < listeners {
			return fmt.Errorf("dhcp service not serving: %d listeners open, want %d", n, listeners)
		}
		// The readiness endpoint, not any one operation: it is declared
		// last, so its answer means every endpoint is subscribed (status
		// can answer while later endpoints are still being added).
		if !bus.Up(env.NC, Name, time.Second) {
			return errors.New("dhcp service not serving: not ready on the bus")
		}
		return nil
	})
}

func (r *runningService) serving() bool {
	r.svc.mu.Lock()
	defer r.svc.mu.Unlock()
	return r.svc.eng != nil
}

func putConfig(t *testing.T, env *testenv.Env, raw string) int64 {
	t.Helper()
	resp, err := env.KV.Put(context.Background(), store.Root+Name+"/"+ConfigDoc, raw)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

func configJSON(t *testing.T, c config.Config) string {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// call sends one request to a dhcp subject and decodes the answer.
func call(t *testing.T, nc *nats.Conn, subject string, query url.Values, out any) int {
	t.Helper()
	rep, err := bus.Call(context.Background(), nc, subject, &pb.Request{Method: http.MethodGet, Query: query, Caller: "127.0.0.1"})
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	if out != nil {
		if err := json.Unmarshal(rep.Body, out); err != nil {
			t.Fatalf("%s: %v: %s", subject, err, rep.Body)
		}
	}
	return rep.Status
}

func status(t *testing.T, nc *nats.Conn) Status {
	t.Helper()
	var st Status
	if code := call(t, nc, api.DHCPStatus.Subject(), nil, &st); code != http.StatusOK {
		t.Fatalf("status: %d", code)
	}
	return st
}

// waitStatus polls the status endpoint (bounded) until ok holds.
func waitStatus(t *testing.T, nc *nats.Conn, what string, ok func(Status) bool) Status {
	t.Helper()
	var st Status
	testenv.Eventually(t, 10*time.Second, func() error {
		if st = status(t, nc); !ok(st) {
			return fmt.Errorf("%s: status stayed %+v", what, st.Config)
		}
		return nil
	})
	return st
}

type leaseList struct {
	Count  int           `json:"count"`
	Total  int           `json:"total"`
	Leases []lease.Lease `json:"leases"`
	Next   string        `json:"next"`
}

// eventLog records every dhcp event the bus carries.
type eventLog struct {
	mu  sync.Mutex
	evs []lease.Lease // Kind holds the event kind, not the lease's
	bad []string
}

func recordEvents(t *testing.T, nc *nats.Conn) *eventLog {
	t.Helper()
	el := &eventLog{}
	_, err := nc.Subscribe(event.SubjectPrefix+"."+Name+".>", func(m *nats.Msg) {
		var ev event.Event
		var l lease.Lease
		_ = json.Unmarshal(m.Data, &ev)
		_ = json.Unmarshal(ev.Data, &l)
		el.mu.Lock()
		defer el.mu.Unlock()
		if m.Subject != event.Subject(Name, ev.Kind) || ev.Service != Name {
			el.bad = append(el.bad, m.Subject+" "+string(m.Data))
		}
		l.Kind = lease.Kind(ev.Kind)
		el.evs = append(el.evs, l)
	})
	if err != nil {
		t.Fatal(err)
	}
	return el
}

// find returns the events of kind about mac.
func (el *eventLog) find(kind, mac string) []lease.Lease {
	el.mu.Lock()
	defer el.mu.Unlock()
	var out []lease.Lease
	for _, l := range el.evs {
		if string(l.Kind) == kind && l.MAC == mac {
			out = append(out, l)
		}
	}
	return out
}

// wait waits (bounded) for the n-th event of kind about mac.
func (el *eventLog) wait(t *testing.T, kind, mac string, n int) lease.Lease {
	t.Helper()
	var ev lease.Lease
	testenv.Eventually(t, 10*time.Second, func() error {
		got := el.find(kind, mac)
		if len(got) < n {
			return fmt.Errorf("event %d of %s for %s never came on the bus (%d did)", n, kind, mac, len(got))
		}
		ev = got[n-1]
		return nil
	})
	return ev
}

// TestServiceOnTheBus runs the dhcp Service against a real etcd and NATS in
// a namespace made by the test, with udhcpc as the subscriber: the stored
// configuration is served, the lease shows in the list endpoint and as an
// event, a changed configuration is applied, an invalid or unparsable one
// is refused with the previous kept (also across a restart), a second
// replica stands by and takes over, and a device asking again within a
// minute is published once.
func TestServiceOnTheBus(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	needRoot(t, "udhcpc")
	tp := newTopo(t)
	env := testenv.Start(t)
	evs := recordEvents(t, env.NC)
	cfg := kernelConfig(tp)
	rev1 := putConfig(t, env, configJSON(t, cfg))
	svc := startService(t, env, tp)
	svc.waitServing(t, env, 3) // v4, v6, ra
	// The stored configuration carried a client and a service: at start
	// they move to keys of their own and the configuration is stored
	// again without them (a later revision).
	st := status(t, env.NC)
	if st.Config.Revision <= rev1 || st.Config.Source != "stored" || st.Counts["clients"] != 1 || st.Counts["services"] != 1 || st.InForce.Clients != nil {
		t.Fatalf("config state %+v, counts %v, want the migrated revision (after %d) from the store, one client and one service counted and not listed", st.Config, st.Counts, rev1)
	}
	if r, err := env.KV.Get(context.Background(), store.Root+Name+"/"+ResvPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || r.Count != 2 {
		t.Fatalf("reservation keys after migration: %v %v, want 2", r, err)
	}
	// Discovery answers for "dhcp": GET /status reports it running.
	if _, err := env.NC.Request("$SRV.PING."+Name, nil, time.Second); err != nil {
		t.Fatalf("micro discovery: %v", err)
	}

	hook, hookLog := tp.script(t)
	const mac = "02:AA:00:00:00:30"
	udhcpc := func(extra ...string) {
		t.Helper()
		a := append([]string{"udhcpc", "-i", tp.cliIf, "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", hook}, extra...)
		if out, err := tp.client(t, 30*time.Second, a...); err != nil {
			t.Fatalf("udhcpc %v: %v\n%s", extra, err, out)
		}
	}
	tp.setMAC(t, mac)
	udhcpc()
	evs.wait(t, event.DeviceUnknown, mac, 1)
	granted := evs.wait(t, event.LeaseGranted, mac, 1)
	if !cfg.Networks[0].Prefix.Contains(granted.Addr) {
		t.Fatalf("granted %v, outside %v", granted.Addr, cfg.Networks[0].Prefix)
	}

	var list leaseList
	if code := call(t, env.NC, api.LeasesList.Subject(), url.Values{"mac": {"02-aa-00-00-00-30"}}, &list); code != http.StatusOK {
		t.Fatalf("leases.list: %d", code)
	}
	if list.Count != 1 || list.Leases[0].Addr != granted.Addr || list.Leases[0].State != lease.Bound {
		t.Fatalf("leases.list for %s: %+v", mac, list)
	}
	if code := call(t, env.NC, api.LeasesList.Subject(), url.Values{"kind": {"v5"}}, nil); code != http.StatusBadRequest {
		t.Errorf("leases.list kind=v5: %d, want 400", code)
	}
	var one struct{ Lease lease.Lease }
	if code := call(t, env.NC, api.LeasesGet.Subject(), url.Values{"address": {granted.Addr.String()}}, &one); code != http.StatusOK || one.Lease.MAC != mac {
		t.Errorf("leases.get %v: %d %+v", granted.Addr, code, one)
	}
	if code := call(t, env.NC, api.LeasesGet.Subject(), url.Values{"address": {"10.77.0.250"}}, nil); code != http.StatusNotFound {
		t.Errorf("leases.get of a free address: %d, want 404", code)
	}
	var sync struct {
		OK     bool     `json:"ok"`
		DryRun bool     `json:"dry_run"`
		Output []string `json:"output"`
	}
	if code := call(t, env.NC, api.PDSync.Subject(), url.Values{"dry": {"1"}}, &sync); code != http.StatusOK || !sync.OK || !sync.DryRun || sync.Output == nil {
		t.Errorf("pd.sync dry: %d %+v", code, sync)
	}

	// A changed configuration is applied: the renewal gets the new lease time.
	cfg2 := cfg
	cfg2.Networks = append([]config.Network(nil), cfg.Networks...)
	cfg2.Networks[0].LeaseTime = 2 * time.Hour
	rev2 := putConfig(t, env, configJSON(t, cfg2))
	waitStatus(t, env.NC, "changed configuration applied", func(st Status) bool {
		return st.Config.Revision == rev2 && st.InForce.Networks[0].LeaseTime == 2*time.Hour
	})
	udhcpc("-r", granted.Addr.String())
	testenv.Eventually(t, 5*time.Second, func() error {
		call(t, env.NC, api.LeasesList.Subject(), url.Values{"mac": {mac}}, &list)
		if l := list.Leases[0]; l.End.Sub(l.Start) <= 90*time.Minute {
			return fmt.Errorf("renewal did not get the new lease time: %+v", list.Leases)
		}
		return nil
	})

	// Invalid, then unparsable: refused, the previous stays in force.
	bad := cfg2
	bad.Lifetimes6.Valid = 60 * time.Second
	rev3 := putConfig(t, env, configJSON(t, bad))
	st = waitStatus(t, env.NC, "invalid configuration refused", func(st Status) bool {
		return st.Config.Refused != nil && st.Config.Refused.Revision == rev3
	})
	if st.Config.Revision != rev2 || st.InForce.Lifetimes6.Valid == 60*time.Second || !strings.Contains(st.Config.Refused.Error, "valid") {
		t.Errorf("after an invalid configuration: %+v, valid %v", st.Config, st.InForce.Lifetimes6.Valid)
	}
	rev4 := putConfig(t, env, `{"networks": [{"iface": "x"}], "lease_tme": 1}`)
	st = waitStatus(t, env.NC, "unparsable configuration refused", func(st Status) bool {
		return st.Config.Refused != nil && st.Config.Refused.Revision == rev4
	})
	if st.Config.Revision != rev2 || !strings.Contains(st.Config.Refused.Error, "unparsable") {
		t.Errorf("after an unparsable configuration: %+v", st.Config)
	}

	// Release, then ask again within the minute: the engine sees an unknown
	// device again, the bus hears of it once.
	// (udhcpc -q -R quits without releasing; a bound udhcpc told to stop does.)
	bound := func() int { b, _ := os.ReadFile(hookLog); return strings.Count(string(b), "\nbound ") }
	n := bound()
	cmd := tp.clientCmd("udhcpc", "-i", tp.cliIf, "-f", "-R", "-t", "5", "-T", "1", "-s", hook, "-r", granted.Addr.String())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // when it did not bind
	testenv.WaitFor(t, 10*time.Second, "udhcpc to bind", func() bool { return bound() > n })
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	evs.wait(t, event.LeaseReleased, mac, 1)
	udhcpc()
	regranted := evs.wait(t, event.LeaseGranted, mac, 2)
	st = waitStatus(t, env.NC, "second unknown_device suppressed", func(st Status) bool { return st.Events.UnknownDeviceSuppressed == 1 })
	if st.Events.Dropped != 0 || st.Events.Failed != 0 {
		t.Errorf("events: %+v", st.Events)
	}
	// The v4 socket counted the exchanges above, and shed none.
	var v4sock *ListenerStats
	for i, l := range st.Listeners {
		if strings.HasPrefix(l.Listener, "4|") {
			v4sock = &st.Listeners[i]
		}
	}
	if v4sock == nil || v4sock.Received < 6 || v4sock.Shed != 0 {
		t.Errorf("listeners: %+v, want the v4 socket with at least 6 requests received, none shed", st.Listeners)
	}
	if got := evs.find(event.DeviceUnknown, mac); len(got) != 1 {
		t.Errorf("device.unknown published %d times for one device within the minute, want 1", len(got))
	}

	// A second replica for the same host stands by while the first serves,
	// then takes over when it stops, with the leases from etcd, and serves
	// the last applied configuration since the stored one is refused.
	standby := startService(t, env, tp)
	// Once the standby's claim is queued behind the holder's it is blocked
	// on the lock, not about to serve.
	testenv.Eventually(t, 10*time.Second, func() error {
		resp, err := env.KV.Get(context.Background(), store.Root+"locks/"+Name+"/", clientv3.WithPrefix())
		if err != nil {
			return err
		}
		if len(resp.Kvs) < 2 {
			return fmt.Errorf("%d claims on the host lock, want the holder's and the standby's", len(resp.Kvs))
		}
		return nil
	})
	if standby.serving() {
		t.Fatal("second replica serves while the first holds the host")
	}
	svc.stop(t)
	standby.waitServing(t, env, 3)
	st = status(t, env.NC)
	if st.Config.Source != "last applied" || st.Config.Revision != rev2 || st.InForce.Networks[0].LeaseTime != 2*time.Hour {
		t.Errorf("standby took over with %+v, lease time %v; want the last applied (revision %d)", st.Config, st.InForce.Networks[0].LeaseTime, rev2)
	}
	if st.Config.Refused == nil || st.Config.Refused.Revision != rev4 {
		t.Errorf("the refused stored configuration is not reported: %+v", st.Config)
	}
	call(t, env.NC, api.LeasesList.Subject(), url.Values{"mac": {mac}}, &list)
	if list.Count != 1 || list.Leases[0].Addr != regranted.Addr {
		t.Fatalf("leases after takeover: %+v, want the lease on %v", list, regranted.Addr)
	}
	el := evs
	el.mu.Lock()
	if len(el.bad) > 0 {
		t.Errorf("events on the wrong subject or from the wrong service: %q", el.bad)
	}
	el.mu.Unlock()

	// Stopped, nothing answers: GET /status would say "stopped".
	standby.stop(t)
	if _, err := env.NC.Request("$SRV.PING."+Name, nil, 300*time.Millisecond); err == nil {
		t.Error("discovery still answers for dhcp after both replicas stopped")
	}
}
