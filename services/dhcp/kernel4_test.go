package dhcp

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/testenv"
)

func kernelConfig(tp *topo) config.Config {
	return config.Config{
		Networks: []config.Network{{
			Iface: tp.srvIf, Gateway: netip.MustParseAddr("10.77.0.1"), Prefix: netip.MustParsePrefix("10.77.0.0/24"),
			PoolStart: netip.MustParseAddr("10.77.0.100"), PoolEnd: netip.MustParseAddr("10.77.0.199"),
		}},
		Networks6: []config.Network6{{
			Iface: tp.srvIf, Gateway: netip.MustParseAddr("2001:db8:77::1"), Prefix: netip.MustParsePrefix("2001:db8:77::/64"),
		}},
		PD: config.PD{
			Pool: netip.MustParsePrefix("2001:db8:a000::/48"), Len: 56, Reserve: 16,
			Slices: map[string]config.Slice{tp.srvIf: {Index: 16, Size: 16}},
		},
		DNS: config.DNS{
			V4: []netip.Addr{netip.MustParseAddr("10.77.0.53")}, V6: []netip.Addr{netip.MustParseAddr("2001:db8:77::53")},
			Domain: "isp.example",
		},
		Clients:  []config.Client{{MAC: "02:aa:00:00:00:05", IP: netip.MustParseAddr("10.77.0.5"), Hostname: "reserved5"}},
		Services: []config.Service{{ID: "svc_0000beef", OLT: "OLT1", PON: "0/1/0", ONTID: 5, IPv4: netip.MustParseAddr("10.77.0.60")}},
		Option82: config.Option82{Enabled: true},
		RA:       config.RA{Interval: 4 * time.Second},
	}
}

// TestKernelDHCPv4Clients runs real clients against the engine: a reserved
// dhclient gets its fixed address, renews it, survives an engine restart and
// releases it; udhcpc and dhcpcd get pool addresses.
func TestKernelDHCPv4Clients(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	needRoot(t, "dhclient")
	tp := newTopo(t)
	h := newHarness(t, tp, kernelConfig(tp))
	hook, hookLog := tp.script(t)
	lf, pf := filepath.Join(tp.dir, "dhclient.leases"), filepath.Join(tp.dir, "dhclient.pid")
	dhclient := func(extra ...string) (string, error) {
		args := append([]string{"dhclient", "-4", "-1", "-v", "-sf", hook, "-lf", lf, "-pf", pf}, extra...)
		return tp.client(t, 40*time.Second, append(args, tp.cliIf)...)
	}

	tp.setMAC(t, "02:aa:00:00:00:05")
	if out, err := dhclient(); err != nil {
		t.Fatalf("dhclient: %v\n%s", err, out)
	}
	l := h.waitLease("reserved dhclient", func(l lease.Lease) bool { return l.MAC == "02:AA:00:00:00:05" })
	if got, want := l.Addr.String(), "10.77.0.5"; got != want {
		t.Fatalf("reserved client leased %s, want %s", got, want)
	}
	if got, want := l.Hostname, "reserved5"; got != want {
		t.Errorf("hostname %q, want %q", got, want)
	}
	if _, ok := h.stored()[l.Key()]; !ok {
		t.Fatalf("lease %s not durable in etcd after the ACK", l.Key())
	}
	b, _ := os.ReadFile(hookLog)
	if !strings.Contains(string(b), "BOUND 10.77.0.5") || !strings.Contains(string(b), "isp.example") {
		t.Errorf("dhclient hook saw:\n%s", b)
	}
	first := l.End

	// Restart the engine mid-test: the lease must come back from etcd.
	h.restart()
	if got, ok := h.eng.Lease(netip.PrefixFrom(l.Addr, 32)); !ok || got.MAC != l.MAC || got.State != lease.Bound {
		t.Fatalf("after restart lease of %s = %+v, %v", l.Addr, got, ok)
	}

	// Renewal: a new dhclient run asks for its old address (INIT-REBOOT).
	// The sleep is part of what is checked: lease ends are in whole seconds
	// on the wire, so the renewal must come in a later second to show that
	// a cached answer leaves the stored end alone.
	time.Sleep(1100 * time.Millisecond)
	if out, err := tp.client(t, 10*time.Second, "sh", "-c", "kill $(cat "+pf+")"); err != nil {
		t.Logf("stopping first dhclient: %v %s", err, out)
	}
	if out, err := dhclient(); err != nil {
		t.Fatalf("dhclient renewal: %v\n%s", err, out)
	}
	// Seconds after the lease was written, the renewal is answered from
	// the lease cache: the same address, and no write (the end is unchanged).
	b, _ = os.ReadFile(hookLog)
	if !strings.Contains(string(b), "REBOOT 10.77.0.5") {
		t.Errorf("dhclient was not re-bound to 10.77.0.5; hook saw:\n%s", b)
	}
	if l2, ok := h.eng.Lease(netip.PrefixFrom(l.Addr, 32)); !ok || l2.MAC != l.MAC || !l2.End.Equal(first) {
		t.Errorf("after a cached renewal lease = %+v, want the same lease ending %v", l2, first)
	}

	// Release frees it, in memory and in etcd.
	if out, err := dhclient("-r"); err != nil {
		t.Fatalf("dhclient -r: %v\n%s", err, out)
	}
	testenv.Eventually(t, 5*time.Second, func() error {
		if got, ok := h.eng.Lease(netip.PrefixFrom(l.Addr, 32)); ok {
			return fmt.Errorf("after release still leased: %+v", got)
		}
		return nil
	})
	if _, ok := h.stored()[l.Key()]; ok {
		t.Errorf("released lease still in etcd")
	}

	t.Run("udhcpc", func(t *testing.T) {
		if _, err := os.Stat("/bin/busybox"); err != nil {
			if _, err := run(t, time.Second, "which", "udhcpc"); err != nil {
				t.Skip("udhcpc not installed")
			}
		}
		tp.setMAC(t, "02:aa:00:00:00:10")
		out, err := tp.client(t, 30*time.Second, "udhcpc", "-i", tp.cliIf, "-n", "-q", "-f", "-t", "5", "-T", "1", "-s", hook, "-x", "hostname:udhcpc-box")
		if err != nil {
			t.Fatalf("udhcpc: %v\n%s", err, out)
		}
		l := h.waitLease("udhcpc", func(l lease.Lease) bool { return l.MAC == "02:AA:00:00:00:10" })
		if !netip.MustParsePrefix("10.77.0.0/24").Contains(l.Addr) || l.Addr.Less(netip.MustParseAddr("10.77.0.100")) {
			t.Errorf("udhcpc got %s, want a pool address", l.Addr)
		}
		if l.Hostname != "udhcpc-box" {
			t.Errorf("udhcpc hostname recorded %q", l.Hostname)
		}
	})

	t.Run("dhcpcd", func(t *testing.T) {
		if _, err := run(t, time.Second, "which", "dhcpcd"); err != nil {
			t.Skip("dhcpcd not installed")
		}
		tp.setMAC(t, "02:aa:00:00:00:11")
		out, err := tp.client(t, 40*time.Second, "dhcpcd", "-f", "/dev/null", "-4", "-1", "-A", "-B", "-c", hook, "-t", "20", tp.cliIf)
		if err != nil {
			t.Fatalf("dhcpcd: %v\n%s", err, out)
		}
		l := h.waitLease("dhcpcd", func(l lease.Lease) bool { return l.MAC == "02:AA:00:00:00:11" })
		if l.Addr.Less(netip.MustParseAddr("10.77.0.100")) {
			t.Errorf("dhcpcd got %s, want a pool address", l.Addr)
		}
		tp.client(t, 10*time.Second, "dhcpcd", "-x", tp.cliIf)
	})
}

// TestKernelOption82 sends a DISCOVER with option 82 as an OLT inserts it
// (giaddr empty), crafted with scapy, and checks the mapped address and
// the echoed option.
func TestKernelOption82(t *testing.T) {
	t.Parallel() // own namespaces and keyspace; mostly waits on clients and timers
	needRoot(t, "/usr/bin/python3")
	if _, err := run(t, 20*time.Second, "/usr/bin/python3", "-c", "import scapy.all"); err != nil {
		t.Skip("python3-scapy not installed")
	}
	tp := newTopo(t)
	newHarness(t, tp, kernelConfig(tp))
	script := filepath.Join(tp.dir, "opt82.py")
	os.WriteFile(script, []byte(`
import sys
from scapy.all import conf, Ether, IP, UDP, BOOTP, DHCP, srp1, mac2str
conf.checkIPaddr = False
iface, mac = sys.argv[1], sys.argv[2]
cid, rid = b"OLT1 xpon 0/1/0:5.1.116", b"48575443ABCDEF01"
opt82 = bytes([1, len(cid)]) + cid + bytes([2, len(rid)]) + rid
p = (Ether(src=mac, dst="ff:ff:ff:ff:ff:ff") / IP(src="0.0.0.0", dst="255.255.255.255") /
     UDP(sport=68, dport=67) / BOOTP(chaddr=mac2str(mac), xid=0x5082, flags=0x8000) /
     DHCP(options=[("message-type", "discover"), ("relay_agent_information", opt82), "end"]))
ans = srp1(p, iface=iface, timeout=8, verbose=0)
if ans is None:
    print("NOANSWER"); sys.exit(1)
print("yiaddr", ans[BOOTP].yiaddr)
for o in ans[DHCP].options:
    if isinstance(o, tuple) and o[0] == "relay_agent_information":
        print("opt82", bytes(o[1]).hex(), bytes(o[1]) == opt82)
`), 0o644)
	out, err := tp.client(t, 60*time.Second, "/usr/bin/python3", script, tp.cliIf, "02:bb:00:00:00:01")
	if err != nil {
		t.Fatalf("scapy: %v\n%s", err, out)
	}
	if !strings.Contains(out, "yiaddr 10.77.0.60") {
		t.Errorf("option 82 DISCOVER not offered the service's address:\n%s", out)
	}
	if !strings.Contains(out, " True") {
		t.Errorf("option 82 not echoed unchanged:\n%s", out)
	}
}
