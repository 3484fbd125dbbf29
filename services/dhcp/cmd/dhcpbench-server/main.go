// Command dhcpbench-server runs the DHCP engine for the perfdhcp benchmark
// against ISC Kea: it serves the recipe's topology (10.99.0.0/16 and
// 2001:db8:99::/64 on vk-srv inside a namespace, the same pools and
// lifetimes as the Kea configs), with leases made durable in a real etcd
// (embedded, data on disk, fsync on) before each answer, and with N
// MAC reservations on a second served interface, stored one key each and
// loaded from etcd as the dhcp service loads them.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	dhcp "routerd.dev/services/dhcp"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/services/dhcp/lease"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/store"
)

func main() {
	ns := flag.String("netns", "/var/run/netns/tk-srv", "namespace to serve in")
	iface := flag.String("iface", "vk-srv", "interface perfdhcp talks to")
	resIface := flag.String("res-iface", "vk-res", "interface holding the reservations' network (empty: none)")
	nres := flag.Int("reservations", 100000, "MAC reservations to load")
	dir := flag.String("etcd-dir", "", "etcd data directory (default: a temporary one)")
	txnOps := flag.Uint("max-txn-ops", 1024, "etcd --max-txn-ops")
	network := flag.Bool("etcd-network-client", false, "reach the embedded etcd over its client URL (gRPC over TCP, as a split deployment's dhcp service would) instead of in process (as routerd's all-in-one does)")
	gogc := flag.Int("gogc", 100, "garbage collector target percentage (GOGC); measured, a higher one costs more CPU than it saves: the bigger heap is refilled with fresh spans")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile here")
	flag.Parse()
	debug.SetGCPercent(*gogc)
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *ns, *iface, *resIface, *nres, *dir, *txnOps, *network); err != nil {
		fmt.Fprintln(os.Stderr, "dhcpbench-server:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

func run(ctx context.Context, ns, iface, resIface string, nres int, dir string, txnOps uint, network bool) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if dir == "" {
		d, err := os.MkdirTemp("", "dhcpbench-etcd")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	etcd, err := store.StartEmbedded(ctx, store.EmbedConfig{Dir: dir, MaxTxnOps: txnOps})
	if err != nil {
		return err
	}
	defer etcd.Close()
	kv := etcd.Client()
	if network {
		if kv, err = store.Dial([]string{etcd.ClientURL}); err != nil {
			return err
		}
	}
	defer kv.Close()
	leases := lease.NewEtcdStore(kv)
	leases.MaxTxnOps = int(txnOps)

	cfg := config.Config{
		Networks: []config.Network{{
			Iface: iface, Gateway: netip.MustParseAddr("10.99.0.1"), Prefix: netip.MustParsePrefix("10.99.0.0/16"),
			PoolStart: netip.MustParseAddr("10.99.1.0"), PoolEnd: netip.MustParseAddr("10.99.255.254"),
			LeaseTime: 4000 * time.Second,
		}},
		Networks6: []config.Network6{{
			Iface: iface, Gateway: netip.MustParseAddr("2001:db8:99::1"), Prefix: netip.MustParsePrefix("2001:db8:99::/64"),
			PoolStart: netip.MustParseAddr("2001:db8:99::1:0"), PoolEnd: netip.MustParseAddr("2001:db8:99::1:ffff"),
		}},
		Lifetimes6: config.Lifetimes6{Valid: 4000 * time.Second, Preferred: 3000 * time.Second},
		PD: config.PD{
			Pool: netip.MustParsePrefix("2001:db8:a000::/36"), Len: 56,
			Slices: map[string]config.Slice{iface: {Index: 0, Size: 1 << 20}},
		},
		Timers: config.Timers{OfferHold: 60 * time.Second},
	}
	var clients []config.Client
	if resIface != "" && nres > 0 {
		cfg.Networks = append(cfg.Networks, config.Network{
			Iface: resIface, Gateway: netip.MustParseAddr("10.100.0.1"), Prefix: netip.MustParsePrefix("10.100.0.0/15"),
			LeaseTime: 4000 * time.Second,
		})
		cfg.Networks6 = append(cfg.Networks6, config.Network6{
			Iface: resIface, Gateway: netip.MustParseAddr("2001:db8:98::1"), Prefix: netip.MustParsePrefix("2001:db8:98::/64"),
		})
		base4 := netip.MustParseAddr("10.100.0.10")
		clients = make([]config.Client, 0, nres)
		base6 := netip.MustParseAddr("2001:db8:98::2:0")
		for i := range nres {
			a4, a6 := base4, base6
			a4 = addN(a4, i)
			a6 = addN(a6, i)
			mac := net.HardwareAddr{0x02, 0x42, byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)}
			clients = append(clients, config.Client{MAC: strings.ToUpper(mac.String()), IP: a4, IPv6: a6})
		}
	}
	// The reservations are stored as the service stores them, one key
	// each under the dhcp prefix, and loaded from there the way the
	// service loads them at start.
	st := store.New(kv, dhcp.Name)
	for i := 0; i < len(clients); i += int(txnOps) {
		txn := st.Txn()
		for _, c := range clients[i:min(i+int(txnOps), len(clients))] {
			txn.Put(st.Key(dhcp.ResvPrefix+"clients/"+c.MAC), c)
		}
		if _, err := txn.Commit(ctx); err != nil {
			return fmt.Errorf("storing the reservations: %w", err)
		}
	}
	t0 := time.Now()
	target, err := netns.Open(ns)
	if err != nil {
		return err
	}
	defer target.Close()
	eng, err := dhcp.New(cfg, dhcp.Deps{Store: leases, NetNS: target, Log: log})
	if err != nil {
		return err
	}
	if _, err := dhcp.LoadReservations(ctx, kv, st.Key(dhcp.ResvPrefix), eng, log); err != nil {
		return err
	}
	n, _ := eng.ReservationCounts()
	fmt.Fprintf(os.Stderr, "dhcpbench-server: %d reservations loaded from their keys in %v, serving %s in %s, etcd %s\n",
		n, time.Since(t0).Round(time.Millisecond), iface, ns, etcd.ClientURL)
	// The listeners' counters go with the listeners when Run returns, so
	// they are read on the signal, before the engine is told to stop.
	runCtx, stopEngine := context.WithCancel(context.Background())
	go func() {
		<-ctx.Done()
		for _, l := range eng.Listeners() {
			if l.Received > 0 {
				fmt.Fprintf(os.Stderr, "dhcpbench-server: %s received %d shed %d\n", l.Listener, l.Received, l.Shed)
			}
		}
		stopEngine()
	}()
	return eng.Run(runCtx)
}

func addN(a netip.Addr, n int) netip.Addr {
	b := a.As16()
	v := uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	v += uint64(n)
	b[12], b[13], b[14], b[15] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	out := netip.AddrFrom16(b)
	if a.Is4() {
		return out.Unmap()
	}
	return out
}
