package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

// wantErr checks that err is an API error of kind k whose message holds msg.
func wantErr(t *testing.T, what string, err error, k apierr.Kind, msg string) *apierr.Error {
	t.Helper()
	var e *apierr.Error
	if !errors.As(err, &e) || e.Kind != k || !strings.Contains(e.Message, msg) {
		t.Fatalf("%s: %v (%#v), want a %d error containing %q", what, err, e, k.Status(), msg)
	}
	return e
}

func storedConfig(t *testing.T, env *testenv.Env) (config.Config, int64) {
	t.Helper()
	resp, err := env.KV.Get(context.Background(), store.Root+Name+"/"+ConfigDoc)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return config.Config{}, 0
	}
	c, err := decodeConfig(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	return c, resp.Kvs[0].ModRevision
}

// TestServedNetworksOverTheBus drives the served-network operations and the
// reservation operations as the gateway and the subscribers service call
// them, against a real engine in a namespace, with udhcpc on the wire: a
// network added through POST /net is served, a reservation added through
// the bus is served at the client's next DISCOVER, a refused change is
// rolled back.
func TestServedNetworksOverTheBus(t *testing.T) {
	t.Parallel()
	needRoot(t, "udhcpc")
	tp := newTopo(t)
	env := testenv.Start(t)
	ctx := context.Background()
	svc := startService(t, env, tp) // nothing stored: serves nothing
	svc.waitServing(t, env, 0)
	// An interface without an address, and one whose subnet overlaps the
	// served one (the engine refuses two overlapping served networks).
	testenv.Run(t, tp.srv, "ip", "link", "add", "bare0", "type", "veth", "peer", "name", "bare1")
	testenv.Run(t, tp.srv, "ip", "link", "add", "dup0", "type", "veth", "peer", "name", "dup1")
	testenv.Run(t, tp.srv, "ip", "addr", "add", "10.77.0.2/25", "dev", "dup0")

	ifs, err := bus.Invoke(ctx, env.NC, api.InterfacesList, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	find := func(l *api.InterfaceList, name string) api.DHCPInterface {
		for _, i := range l.Interfaces {
			if i.Iface == name {
				return i
			}
		}
		t.Fatalf("interfaces: %s missing from %+v", name, l)
		return api.DHCPInterface{}
	}
	if i := find(ifs, tp.srvIf); i.Gateway != "10.77.0.1" || i.Network != "10.77.0.0/24" || i.CIDR != 24 || i.InDHCPConf || i.DHCPActive ||
		i.Network6 != "2001:db8:77::/64" || i.Gateway6 != "2001:db8:77::1" || i.DHCP6Active {
		t.Fatalf("interface before POST /net: %+v", i)
	}
	if ifs.Count != len(ifs.Interfaces) {
		t.Errorf("count %d for %d interfaces", ifs.Count, len(ifs.Interfaces))
	}

	// 404: no IPv4 address (and nothing stored).
	_, err = bus.Invoke(ctx, env.NC, api.NetAdd, &api.NetIface{Iface: "bare0"})
	wantErr(t, "POST /net without an address", err, apierr.KindNotFound, "no IPv4 address")
	_, err = bus.Invoke(ctx, env.NC, api.NetAdd, &api.NetIface{Iface: "bad name!"})
	if e := wantErr(t, "POST /net bad name", err, apierr.KindInvalid, ""); e.Fields["field"] != "iface" {
		t.Errorf("bad name: field %v", e.Fields["field"])
	}

	// POST /net: 201, stored, served, and the change published.
	added := make(chan *nats.Msg, 4)
	if _, err := env.NC.ChanSubscribe(event.Subject(Name, api.DHCPNetAdded), added); err != nil {
		t.Fatal(err)
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	add, err := bus.Invoke(ctx, env.NC, api.NetAdd, &api.NetIface{Iface: tp.srvIf, Label: "subscribers"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-added:
		if !strings.Contains(string(m.Data), `"10.77.0.0/24"`) {
			t.Errorf("net.added event without the network: %s", m.Data)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("no %s event after POST /net", api.DHCPNetAdded)
	}
	if add.Code != 201 || !add.OK || add.Network != (api.NetBlock{Iface: tp.srvIf, Gateway: "10.77.0.1", Network: "10.77.0.0/24", CIDR: 24}) ||
		add.Label == nil || *add.Label != "subscribers" {
		t.Fatalf("POST /net: %+v", add)
	}
	stored, rev := storedConfig(t, env)
	if len(stored.Networks) != 1 || stored.Networks[0].Label != "subscribers" {
		t.Fatalf("stored after POST /net: %+v", stored.Networks)
	}
	nets, err := bus.Invoke(ctx, env.NC, api.NetworksList, &api.None{})
	if err != nil {
		t.Fatal(err)
	}
	want := api.ServedNetwork{Iface: tp.srvIf, Gateway: "10.77.0.1", Subnet: "10.77.0.0", Mask: "255.255.255.0", CIDR: 24,
		Network: "10.77.0.0/24", Bcast: "10.77.0.255", Label: "subscribers"}
	if nets.Count != 1 || nets.Networks[0] != want {
		t.Fatalf("GET /networks: %+v, want %+v", nets, want)
	}
	ifs, _ = bus.Invoke(ctx, env.NC, api.InterfacesList, &api.None{})
	if i := find(ifs, tp.srvIf); !i.InDHCPConf || !i.InDHCPListen || !i.DHCPActive {
		t.Fatalf("interface after POST /net: %+v", i)
	}
	svc.waitServing(t, env, 1)

	hook, hookLog := tp.script(t)
	udhcpc := func(mac string) string {
		t.Helper()
		tp.setMAC(t, mac)
		out, err := tp.client(t, 30*time.Second, "udhcpc", "-i", tp.cliIf, "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", hook)
		if err != nil {
			t.Fatalf("udhcpc: %v\n%s", err, out)
		}
		return out
	}
	udhcpc("02:aa:00:00:01:01")
	eng, _ := svc.svc.engine()
	dyn := waitLeaseOf(t, eng, "02:AA:00:00:01:01")
	if !netip.MustParsePrefix("10.77.0.0/24").Contains(dyn.Addr) {
		t.Fatalf("udhcpc leased %v", dyn.Addr)
	}

	// A reservation through the bus operation: served at the next DISCOVER,
	// by the same listener (a reopened one would count from zero again).
	received := func() uint64 {
		for _, l := range eng.Listeners() {
			if l.Listener == "4|"+tp.srvIf {
				return l.Received
			}
		}
		t.Fatalf("no listener on %s: %+v", tp.srvIf, eng.Listeners())
		return 0
	}
	before := received()
	r, err := bus.Invoke(ctx, env.NC, api.ReservationPutClient, &api.ClientReservation{MAC: "02-aa-00-00-01-02", IP: "10.77.0.50", Hostname: "cpe2"})
	if err != nil || r.Code != 201 || r.Client.MAC != "02:AA:00:00:01:02" {
		t.Fatalf("reservation: %+v %v", r, err)
	}
	if kv, err := env.KV.Get(ctx, store.Root+Name+"/"+ResvPrefix+"clients/02:AA:00:00:01:02"); err != nil || len(kv.Kvs) != 1 {
		t.Fatalf("reservation key: %v %v", kv, err)
	}
	if _, rev2 := storedConfig(t, env); rev2 != rev {
		t.Errorf("a reservation rewrote the configuration document (revision %d -> %d)", rev, rev2)
	}
	udhcpc("02:aa:00:00:01:02")
	if l := waitLeaseOf(t, eng, "02:AA:00:00:01:02"); l.Addr.String() != "10.77.0.50" || l.Hostname != "cpe2" {
		t.Fatalf("reserved client leased %+v", l)
	}
	if after := received(); after <= before {
		t.Errorf("listener counted %d requests before the reservation and %d after: it was reopened", before, after)
	}
	if b := readFile(t, hookLog); !strings.Contains(b, "10.77.0.50") {
		t.Errorf("udhcpc hook saw:\n%s", b)
	}
	// Changed: 200. Conflicts: 409; outside the served networks: 400.
	if r, err := bus.Invoke(ctx, env.NC, api.ReservationPutClient, &api.ClientReservation{MAC: "02:aa:00:00:01:02", IP: "10.77.0.51"}); err != nil || r.Code != 200 {
		t.Fatalf("reservation change: %+v %v", r, err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.ReservationPutClient, &api.ClientReservation{MAC: "02:aa:00:00:01:03", IP: "10.77.0.51"})
	wantErr(t, "reservation on a reserved address", err, apierr.KindConflict, "10.77.0.51")
	_, err = bus.Invoke(ctx, env.NC, api.ReservationPutClient, &api.ClientReservation{MAC: "02:aa:00:00:01:03", IP: "10.99.0.5"})
	wantErr(t, "reservation outside", err, apierr.KindInvalid, "outside served networks")
	_, err = bus.Invoke(ctx, env.NC, api.ReservationPutClient, &api.ClientReservation{MAC: "02:aa:00:00:01:03", IP: "10.77.0.1"})
	wantErr(t, "reservation on the gateway", err, apierr.KindInvalid, "gateway")
	if _, err := bus.Invoke(ctx, env.NC, api.ReservationPutService, &api.ServiceReservation{ID: "svc_1", PON: "0/1/0", ONTID: 3, IPv4: "10.77.0.60"}); err != nil {
		t.Fatal(err)
	}
	_, err = bus.Invoke(ctx, env.NC, api.ReservationPutService, &api.ServiceReservation{ID: "svc_2", PON: "0/1/0", ONTID: 3, IPv4: "10.77.0.61"})
	wantErr(t, "service on a taken port", err, apierr.KindConflict, "0/1/0")
	list, err := bus.Invoke(ctx, env.NC, api.ReservationsList, &api.ReservationFilter{Kind: "clients", Limit: 10})
	if err != nil || list.Count != 1 || list.Clients[0].IP != "10.77.0.51" {
		t.Fatalf("reservations.list: %+v %v", list, err)
	}

	// DELETE /net with reservations inside: 409 with the count.
	_, err = bus.Invoke(ctx, env.NC, api.NetDelete, &api.NetIface{Iface: tp.srvIf})
	wantErr(t, "DELETE /net with clients", err, apierr.KindConflict, "cannot remove, 2 clients registered on the interface, delete them first")

	// A change the engine refuses (an overlapping second network): 500,
	// rolled back, the stored configuration and the engine unchanged.
	_, err = bus.Invoke(ctx, env.NC, api.NetAdd, &api.NetIface{Iface: "dup0"})
	e := wantErr(t, "POST /net overlapping", err, apierr.KindInternal, "rolled back")
	if !strings.HasSuffix(e.Message, "rolled back") || !strings.Contains(fmt.Sprint(e.Fields["detail"]), "overlap") {
		t.Errorf("refusal: %q detail %v", e.Message, e.Fields["detail"])
	}
	if c, rev2 := storedConfig(t, env); rev2 != rev || len(c.Networks) != 1 {
		t.Errorf("after a refused change the store holds %+v (revision %d, was %d)", c.Networks, rev2, rev)
	}
	if c := eng.Config(); len(c.Networks) != 1 {
		t.Errorf("after a refused change the engine serves %+v", c.Networks)
	}

	// DELETE /net: on an unserved interface with an address 500, without 404.
	_, err = bus.Invoke(ctx, env.NC, api.NetDelete, &api.NetIface{Iface: "dup0"})
	wantErr(t, "DELETE /net unserved", err, apierr.KindInternal, "no subnet block")
	_, err = bus.Invoke(ctx, env.NC, api.NetDelete, &api.NetIface{Iface: "bare0"})
	wantErr(t, "DELETE /net no address", err, apierr.KindNotFound, "no IPv4 address")

	for _, ref := range []api.ReservationRef{{MAC: "02:aa:00:00:01:02"}, {ID: "svc_1"}} {
		if _, err := bus.Invoke(ctx, env.NC, api.ReservationDelete, &ref); err != nil {
			t.Fatal(err)
		}
	}
	_, err = bus.Invoke(ctx, env.NC, api.ReservationDelete, &api.ReservationRef{ID: "svc_1"})
	wantErr(t, "second delete", err, apierr.KindNotFound, "svc_1")
	del, err := bus.Invoke(ctx, env.NC, api.NetDelete, &api.NetIface{Iface: tp.srvIf})
	if err != nil || del.Network != (api.NetBlock{Iface: tp.srvIf, Network: "10.77.0.0/24"}) {
		t.Fatalf("DELETE /net: %+v %v", del, err)
	}
	if nets, _ := bus.Invoke(ctx, env.NC, api.NetworksList, &api.None{}); nets.Count != 0 {
		t.Errorf("GET /networks after DELETE /net: %+v", nets)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := eng.listenerCount(); n != 0 {
			return fmt.Errorf("%d listeners still open after DELETE /net", n)
		}
		return nil
	})

	// A key written by another writer straight to etcd is served through
	// the watch, as one element change; its deletion too.
	if _, err := bus.Invoke(ctx, env.NC, api.NetAdd, &api.NetIface{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	key := store.Root + Name + "/" + ResvPrefix + "clients/02:AA:00:00:01:09"
	if _, err := env.KV.Put(ctx, key, `{"mac":"02:AA:00:00:01:09","ip":"10.77.0.9"}`); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "watched reservation served", func() bool {
		c, ok := eng.client("02:AA:00:00:01:09")
		return ok && c.IP.String() == "10.77.0.9"
	})
	if _, err := env.KV.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, 5*time.Second, "watched deletion applied", func() bool {
		_, ok := eng.client("02:AA:00:00:01:09")
		return !ok
	})

	// POST /dhcp/reload re-reads the store.
	if rl, err := bus.Invoke(ctx, env.NC, api.DHCPReload, &api.None{}); err != nil || !rl.OK {
		t.Fatalf("reload: %+v %v", rl, err)
	}
	if c := eng.Config(); len(c.Networks) != 1 {
		t.Errorf("after reload the engine serves %+v", c.Networks)
	}
}

func waitLeaseOf(t *testing.T, eng *Engine, mac string) lease.Lease {
	t.Helper()
	var got lease.Lease
	testenv.Eventually(t, 10*time.Second, func() error {
		for _, l := range eng.Leases() {
			if l.MAC == mac && l.State == lease.Bound && l.Kind == lease.V4 {
				got = l
				return nil
			}
		}
		return fmt.Errorf("no bound lease for %s", mac)
	})
	return got
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// TestReservationsMigrateAndReload: a stored configuration carrying
// clients, a pinned prefix and a service is split into one key each at
// start (the pinned prefix joins its client's key) and stored again
// without them; a restarted service loads the keys back.
func TestReservationsMigrateAndReload(t *testing.T) {
	t.Parallel()
	needRoot(t)
	tp := newTopo(t)
	env := testenv.Start(t)
	ctx := context.Background()
	cfg := kernelConfig(tp)
	cfg.PD.Pinned = []config.Pinned{{MAC: "02-aa-00-00-00-05", Prefix: netip.MustParsePrefix("2001:db8:a000:300::/56")}}
	putConfig(t, env, configJSON(t, cfg))
	svc := startService(t, env, tp)
	svc.waitServing(t, env, 3)
	stored, _ := storedConfig(t, env)
	if len(stored.Clients) != 0 || len(stored.Services) != 0 || len(stored.PD.Pinned) != 0 || len(stored.Networks) != 1 {
		t.Fatalf("stored after migration: %+v", stored)
	}
	list, err := bus.Invoke(ctx, env.NC, api.ReservationsList, &api.ReservationFilter{Kind: "clients", Limit: 10})
	if err != nil || list.Count != 1 || list.Clients[0] != (api.ClientReservation{MAC: "02:AA:00:00:00:05", IP: "10.77.0.5", Prefix6: "2001:db8:a000:300::/56", Hostname: "reserved5"}) {
		t.Fatalf("clients after migration: %+v %v", list, err)
	}
	if l, err := bus.Invoke(ctx, env.NC, api.ReservationsList, &api.ReservationFilter{Kind: "services", Limit: 10}); err != nil || l.Count != 1 || l.Services[0].ID != "svc_0000beef" {
		t.Fatalf("services after migration: %+v %v", l, err)
	}
	if pd, err := bus.Invoke(ctx, env.NC, api.PDGet, &api.None{}); err != nil || len(pd.Pinned) != 1 || pd.Pinned[0].Prefix6 != "2001:db8:a000:300::/56" {
		t.Fatalf("GET /pd pinned after migration: %+v %v", pd, err)
	}
	svc.stop(t)

	svc2 := startService(t, env, tp)
	svc2.waitServing(t, env, 3)
	eng, _ := svc2.svc.engine()
	if c, s := eng.ReservationCounts(); c != 1 || s != 1 {
		t.Fatalf("after a restart the engine holds %d clients and %d services", c, s)
	}
	if c, ok := eng.client("02:AA:00:00:00:05"); !ok || c.Prefix6.String() != "2001:db8:a000:300::/56" {
		t.Fatalf("after a restart: %+v %v", c, ok)
	}
}
