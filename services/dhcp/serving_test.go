package dhcp

import (
	"context"
	"encoding/binary"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

// raLifetimes reads the router advertisements reaching the subscriber's
// namespace and sends each one's router lifetime (seconds) on the channel
// until the test ends.
func raLifetimes(t *testing.T, tp *topo) <-chan uint16 {
	t.Helper()
	var c net.PacketConn
	err := tp.cli.Do(func() error {
		var err error
		c, err = net.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	out := make(chan uint16, 64)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, _, err := c.ReadFrom(buf)
			if err != nil {
				return
			}
			if n >= 16 && buf[0] == 134 { // router advertisement
				select {
				case out <- binary.BigEndian.Uint16(buf[6:8]):
				default:
				}
			}
		}
	}()
	return out
}

// TestServingSuspendAndResume drives serving.set as netcfg's VLAN disable
// and enable call it, against a real engine with udhcpc on the wire: while
// suspended the interface's subnets stay configured and stored, nothing is
// answered (a new client gets no lease), the advertiser leaves with a
// router lifetime of 0, GET /interfaces says it is out of the listen list,
// and a restart keeps it so; resumed, a client gets a lease again.
func TestServingSuspendAndResume(t *testing.T) {
	t.Parallel()
	needRoot(t, "udhcpc")
	tp := newTopo(t)
	env := testenv.Start(t)
	ctx := context.Background()
	svc := startService(t, env, tp)
	svc.waitServing(t, env, 0)
	if _, err := bus.Invoke(ctx, env.NC, api.NetAdd, &api.NetIface{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Invoke(ctx, env.NC, api.Net6Add, &api.Net6Iface{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	svc.waitServing(t, env, 3) // DHCPv4, DHCPv6, advertisements
	hook, _ := tp.script(t)
	udhcpc := func(mac string) error {
		t.Helper()
		tp.setMAC(t, mac)
		out, err := tp.client(t, 30*time.Second, "udhcpc", "-i", tp.cliIf, "-n", "-q", "-f", "-t", "4", "-T", "1", "-s", hook)
		if err != nil {
			t.Logf("udhcpc %s: %v\n%s", mac, err, out)
		}
		return err
	}
	if err := udhcpc("02:aa:00:00:02:01"); err != nil {
		t.Fatal("no lease while served")
	}
	iface := func() api.DHCPInterface {
		t.Helper()
		ifs, err := bus.Invoke(ctx, env.NC, api.InterfacesList, &api.None{})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range ifs.Interfaces {
			if i.Iface == tp.srvIf {
				return i
			}
		}
		t.Fatalf("%s missing from GET /interfaces", tp.srvIf)
		return api.DHCPInterface{}
	}

	ras := raLifetimes(t, tp)
	off, err := bus.Invoke(ctx, env.NC, api.ServingSetOp, &api.ServingSet{Iface: tp.srvIf, Reason: "fibre cut"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"DHCPv4", "DHCPv6", "router advertisements"}; !slices.Equal(off.TookOffline, want) ||
		off.Suspended == nil || off.Suspended.Reason != "fibre cut" {
		t.Fatalf("suspend: %+v, want took_offline %v", off, want)
	}
	stored, _ := storedConfig(t, env)
	if s, ok := stored.Suspended[tp.srvIf]; !ok || s.Reason != "fibre cut" || len(stored.Networks) != 1 || len(stored.Networks6) != 1 {
		t.Fatalf("stored after suspend: suspended %+v, %d networks, %d networks6", stored.Suspended, len(stored.Networks), len(stored.Networks6))
	}
	eng, _ := svc.svc.engine()
	testenv.Eventually(t, 5*time.Second, func() error {
		if n := eng.listenerCount(); n != 0 {
			return errString("listeners still open on a suspended interface")
		}
		return nil
	})
	// The advertiser's last word: router lifetime 0.
	deadline := time.After(5 * time.Second)
	for final := false; !final; {
		select {
		case l := <-ras:
			final = l == 0
		case <-deadline:
			t.Fatal("no router advertisement with lifetime 0 after the suspension")
		}
	}
	if i := iface(); !i.InDHCPConf || i.InDHCPListen || i.DHCPActive || !i.InDHCP6Conf || i.InDHCP6List || i.DHCP6Active || i.Suspended == nil {
		t.Errorf("GET /interfaces while suspended: %+v", i)
	}
	if err := udhcpc("02:aa:00:00:02:02"); err == nil {
		t.Fatal("a client got a lease on a suspended interface")
	}
	// Again: nothing to do, nothing stored.
	_, rev := storedConfig(t, env)
	again, err := bus.Invoke(ctx, env.NC, api.ServingSetOp, &api.ServingSet{Iface: tp.srvIf})
	if err != nil || len(again.TookOffline) != 0 || !strings.Contains(again.Message, "already suspended") {
		t.Errorf("second suspend: %+v %v", again, err)
	}
	if _, rev2 := storedConfig(t, env); rev2 != rev {
		t.Errorf("a second suspend rewrote the configuration")
	}

	// A restart keeps the suspension.
	svc.stop(t)
	svc = startService(t, env, tp)
	svc.waitServing(t, env, 0)
	time.Sleep(500 * time.Millisecond) // a listener wrongly reopened would be by now (ListenRetry 200 ms)
	if eng, _ = svc.svc.engine(); eng.listenerCount() != 0 {
		t.Fatalf("a restarted engine serves the suspended interface: %+v", eng.Listeners())
	}
	if err := udhcpc("02:aa:00:00:02:03"); err == nil {
		t.Fatal("a client got a lease on a suspended interface after a restart")
	}

	on, err := bus.Invoke(ctx, env.NC, api.ServingSetOp, &api.ServingSet{Iface: tp.srvIf, Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"DHCPv4", "DHCPv6", "router advertisements"}; !slices.Equal(on.Restored, want) || on.Suspended == nil {
		t.Fatalf("resume: %+v", on)
	}
	svc.waitServing(t, env, 3)
	if err := udhcpc("02:aa:00:00:02:04"); err != nil {
		t.Fatal("no lease after the resumption")
	}
	if i := iface(); !i.DHCPActive || !i.DHCP6Active || i.Suspended != nil {
		t.Errorf("GET /interfaces after the resumption: %+v", i)
	}
	if stored, _ := storedConfig(t, env); len(stored.Suspended) != 0 {
		t.Errorf("stored after resume: %+v", stored.Suspended)
	}

	// An interface that serves nothing: nothing to suspend, nothing stored.
	none, err := bus.Invoke(ctx, env.NC, api.ServingSetOp, &api.ServingSet{Iface: "nothere0"})
	if err != nil || len(none.TookOffline) != 0 || !strings.Contains(none.Message, "not served") {
		t.Errorf("suspend of an unserved interface: %+v %v", none, err)
	}
	// A suspended interface whose networks are removed loses its suspension
	// with them.
	if _, err := bus.Invoke(ctx, env.NC, api.ServingSetOp, &api.ServingSet{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Invoke(ctx, env.NC, api.NetDelete, &api.NetIface{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.Invoke(ctx, env.NC, api.Net6Delete, &api.Net6Iface{Iface: tp.srvIf}); err != nil {
		t.Fatal(err)
	}
	if stored, _ := storedConfig(t, env); len(stored.Suspended) != 0 {
		t.Errorf("suspension left after its networks were removed: %+v", stored.Suspended)
	}
}

type errString string

func (e errString) Error() string { return string(e) }
