package netcfg_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

// TestFullKernelBenchVLANs measures (make bench-vlan, in the VM) creating
// C-VLANs with an address each inside S-VLANs through the API (one S-VLAN
// per 16-port card, one C-VLAN per PON port: ROUTERD_BENCH_VLANS of them,
// 4,000 = 250 cards), the reconcile at a restart that finds none of them in
// the kernel, and the reconcile of an unchanged set, each side by side
// with `ip -batch` doing the same link and address work in another
// namespace of the same kernel.
func TestFullKernelBenchVLANs(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ROUTERD_BENCH_VLANS"))
	if n == 0 {
		t.Skip("a benchmark: make bench-vlan runs it (ROUTERD_BENCH_VLANS=4000) in the VM")
	}
	cards := (n + 15) / 16
	env := testenv.Start(t)
	ns := testenv.Netns(t)
	port(t, ns)
	r := start(t, env, ns)
	ctx := context.Background()
	f := false
	var took []time.Duration
	begin := time.Now()
	for c := 0; c < cards; c++ {
		s := 100 + c
		if _, err := bus.Invoke(ctx, env.NC, api.VLANsCreate, &api.VLANAdd{Parent: "r0", VLANID: s, Protocol: "802.1ad", Serve: &f}); err != nil {
			if strings.Contains(err.Error(), "802.1Q") {
				t.Skip("this kernel has no 802.1Q/802.1ad: make bench-vlan runs this in the VM")
			}
			t.Fatal(err)
		}
		for p := 0; p < 16 && c*16+p < n; p++ {
			t0 := time.Now()
			_, err := bus.Invoke(ctx, env.NC, api.VLANsCreate, &api.VLANAdd{Parent: fmt.Sprintf("svlan%d", s), VLANID: 100 + p,
				Protocol: "802.1Q", IP: fmt.Sprintf("10.%d.%d.1/24", c/16, (c%16)*16+p), Serve: &f})
			if err != nil {
				t.Fatal(err)
			}
			took = append(took, time.Since(t0))
		}
	}
	total := time.Since(begin)
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	p50, p99 := took[len(took)/2], took[len(took)*99/100]

	// The restart finds the kernel empty (a reboot): everything is made
	// again by the reconcile.
	r.stop()
	wipe(t, ns)
	t0 := time.Now()
	r = startWithin(t, env, ns, 10*time.Minute)
	reconcile := time.Since(t0)
	links := strings.Count(testenv.Run(t, ns, "ip", "-o", "link", "show"), ": svlan")
	// An unchanged set: a restart changes nothing, which `ip monitor`
	// (every link and address notification of the namespace) sees.
	addrs := func() string {
		return strings.ReplaceAll(testenv.Run(t, ns, "ip", "-o", "addr", "show"), " tentative", "")
	}
	before, beforeLinks := addrs(), testenv.Run(t, ns, "ip", "-d", "-o", "link", "show")
	r.stop()
	// The kernel's own changes of the first restart's links (IPv6
	// duplicate address detection ending) are over before the monitor
	// starts.
	testenv.Eventually(t, 2*time.Minute, func() error {
		if out := testenv.Run(t, ns, "ip", "-o", "addr", "show"); strings.Contains(out, "tentative") {
			return fmt.Errorf("addresses still tentative")
		}
		return nil
	})
	var seen strings.Builder
	mon := exec.Command("nsenter", "--net="+ns.Path(), "ip", "-o", "monitor", "link", "address")
	mon.Stdout = &seen
	if err := mon.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	t0 = time.Now()
	startWithin(t, env, ns, 10*time.Minute)
	unchanged := time.Since(t0)
	time.Sleep(time.Second)
	_ = mon.Process.Kill()
	_ = mon.Wait()
	notes := strings.Count(seen.String(), "\n")
	if notes != 0 {
		t.Errorf("the unchanged restart made %d netlink changes:\n%s", notes, seen.String())
	}
	if after := addrs(); after != before {
		t.Errorf("the unchanged reconcile changed addresses")
	}
	if after := testenv.Run(t, ns, "ip", "-d", "-o", "link", "show"); after != beforeLinks {
		t.Errorf("the unchanged reconcile changed links")
	}

	// ip -batch: the same links (alias and up included) and addresses.
	other := testenv.Netns(t)
	testenv.Run(t, other, "ip", "link", "add", "r0", "type", "veth", "peer", "name", "r0p")
	testenv.Run(t, other, "ip", "link", "set", "r0", "up")
	var b strings.Builder
	for c := 0; c < cards; c++ {
		s := 100 + c
		fmt.Fprintf(&b, "link add link r0 name svlan%d type vlan proto 802.1ad id %d\nlink set svlan%d alias routerd:netcfg up\n", s, s, s)
		for p := 0; p < 16 && c*16+p < n; p++ {
			name := fmt.Sprintf("svlan%d.%d", s, 100+p)
			fmt.Fprintf(&b, "link add link svlan%d name %s type vlan id %d\nlink set %s alias routerd:netcfg up\naddr add 10.%d.%d.1/24 dev %s\n",
				s, name, 100+p, name, c/16, (c%16)*16+p, name)
		}
	}
	batch := filepath.Join(t.TempDir(), "batch")
	if err := os.WriteFile(batch, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	if out, err := exec.Command("nsenter", "--net="+other.Path(), "ip", "-batch", batch).CombinedOutput(); err != nil {
		t.Fatalf("ip -batch: %v\n%s", err, out)
	}
	ipBatch := time.Since(t0)
	// And again after the same wipe as the restart's, in the same
	// conditions.
	wipe(t, other)
	t0 = time.Now()
	if out, err := exec.Command("nsenter", "--net="+other.Path(), "ip", "-batch", batch).CombinedOutput(); err != nil {
		t.Fatalf("ip -batch after a wipe: %v\n%s", err, out)
	}
	ipAgain := time.Since(t0)
	t.Logf("%d C-VLANs in %d S-VLANs, each with an address", n, cards)
	per := ipBatch / time.Duration(n)
	t.Logf("through the API: %v in all, %v per C-VLAN (p50 %v = %.1fx, p99 %v = %.1fx ip -batch per C-VLAN)", total, total/time.Duration(n),
		p50, float64(p50)/float64(per), p99, float64(p99)/float64(per))
	t.Logf("ip -batch, the same links and addresses: %v (%v per C-VLAN)", ipBatch, per)
	t.Logf("ip -batch again after the same wipe as the restart's: %v", ipAgain)
	t.Logf("restart, kernel empty: netcfg ready after %v (%.2fx ip -batch, %.2fx ip -batch after a wipe); %d VLAN links after",
		reconcile, float64(reconcile)/float64(ipBatch), float64(reconcile)/float64(ipAgain), links)
	t.Logf("restart, nothing to change: ready after %v; %d link or address notifications (ip monitor), links and addresses unchanged", unchanged, notes)
}

// wipe deletes the S-VLANs of a namespace (their C-VLANs with them), as a
// reboot would leave it, and gives the kernel the time a reboot would to
// finish the deletion's deferred work (freeing thousands of links goes on
// after the last `ip link del` returns, and under emulation it slowed
// whatever came next).
func wipe(t *testing.T, ns *netns.NS) {
	t.Helper()
	testenv.Run(t, ns, "sh", "-c", "for l in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep '^svlan' | grep -v '\\.'); do ip link del $l; done")
	time.Sleep(10 * time.Second)
}
