package firewall_test

import (
	"strings"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/testenv"
)

// A suspended subscriber's forwarded traffic is dropped by one element of
// block4 (and its IPv6 prefix by one of block6), both ways, while what it
// sends to the router itself (DHCP) still arrives; unblocking lets it
// through again. Blocks are stored and come back after a restart, and the
// restart takes out what the kernel had and the store has not.
func TestSuspensionBlockInKernel(t *testing.T) {
	tp := newTopo(t)
	env := testenv.Start(t)
	r := start(t, env, tp.router, firewall.Deps{})
	listen(t, tp.up, "["+upAddr6+"]:9000")
	listen(t, tp.up, upAddr+":9000")
	if err := dial(tp.sub, upAddr+":9000", 2*time.Second); err != nil {
		t.Fatalf("before the block: %v", err)
	}

	ans, err := invoke(t, env, api.FirewallBlock, &api.Block{ID: "aa:bb:cc:00:00:05", MAC: "aa-bb-cc-00-00-05", IP: subAddr, IPv6: "2001:db8:a::/64"})
	if err != nil {
		t.Fatal(err)
	}
	if ans.Code != 201 || ans.Block.MAC != "AA:BB:CC:00:00:05" || ans.Block.IPv6 != "2001:db8:a::/64" {
		t.Errorf("block answer = %+v %+v", ans.Result, ans.Block)
	}
	if err := dial(tp.sub, upAddr+":9000", 500*time.Millisecond); err == nil {
		t.Error("a blocked subscriber connected upstream over IPv4")
	}
	if err := dial(tp.sub, "["+upAddr6+"]:9000", 500*time.Millisecond); err == nil {
		t.Error("a blocked subscriber connected upstream over IPv6")
	}
	// DHCP to the router still arrives (input is not forward).
	if err := udpRoundTrip(t, tp.sub, tp.router, ":67", routerSub+":67", 2*time.Second); err != nil {
		t.Errorf("a blocked subscriber's datagram to the router: %v", err)
	}
	out := nftList(t, tp.router)
	for _, want := range []string{`10.0.0.5 comment "aa:bb:cc:00:00:05"`, `2001:db8:a::/64 comment "aa:bb:cc:00:00:05"`} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %s:\n%s", want, out)
		}
	}

	// Same block again: 200, unchanged; a bad IPv6 is a 400 naming it.
	if a, err := invoke(t, env, api.FirewallBlock, &api.Block{ID: "aa:bb:cc:00:00:05", MAC: "AA:BB:CC:00:00:05", IP: subAddr, IPv6: "2001:db8:a::/64"}); err != nil || a.Code != 200 {
		t.Errorf("repeat block: %+v %v", a, err)
	}
	_, err = invoke(t, env, api.FirewallBlock, &api.Block{ID: "x", IP: "10.0.0.9", IPv6: "10.0.0.0/8"})
	if e := apierr.From(err); e == nil || e.Kind != apierr.KindInvalid || e.Fields["field"] != "ipv6" {
		t.Errorf("IPv4 in ipv6: %v", err)
	}
	// A second block sharing the address, then removed: the element stays
	// for the first.
	if _, err := invoke(t, env, api.FirewallBlock, &api.Block{ID: "svc-7", IP: subAddr}); err != nil {
		t.Fatal(err)
	}
	if _, err := invoke(t, env, api.FirewallUnblock, &api.BlockRef{ID: "svc-7"}); err != nil {
		t.Fatal(err)
	}
	if err := dial(tp.sub, upAddr+":9000", 500*time.Millisecond); err == nil {
		t.Error("removing a second block of the same address unblocked the first")
	}
	page, err := invoke(t, env, api.FirewallBlocks, &api.BlockPageRequest{Limit: 10})
	if err != nil || page.Count != 1 || page.Blocks[0].ID != "aa:bb:cc:00:00:05" {
		t.Fatalf("page = %+v, %v", page, err)
	}

	// Restart with drift: the kernel lost the block and gained a stray
	// element; the store wins both ways, and a second start changes nothing.
	r.stop()
	testenv.Run(t, tp.router, "nft", "flush", "set", "inet", "routerd_firewall", "block4")
	testenv.Run(t, tp.router, "nft", "add", "element", "inet", "routerd_firewall", "block4", "{ 10.0.0.77 }")
	r = start(t, env, tp.router, firewall.Deps{})
	out = nftList(t, tp.router)
	if !strings.Contains(out, "10.0.0.5") || strings.Contains(out, "10.0.0.77") {
		t.Errorf("after restart:\n%s", out)
	}
	if err := dial(tp.sub, upAddr+":9000", 500*time.Millisecond); err == nil {
		t.Error("the block did not hold across a restart")
	}
	r.stop()
	r = start(t, env, tp.router, firewall.Deps{})
	if diff := strings.Compare(out, nftList(t, tp.router)); diff != 0 {
		t.Errorf("second start changed the table:\n%s\n---\n%s", out, nftList(t, tp.router))
	}

	if _, err := invoke(t, env, api.FirewallUnblock, &api.BlockRef{ID: "aa:bb:cc:00:00:05"}); err != nil {
		t.Fatal(err)
	}
	if err := dial(tp.sub, upAddr+":9000", 2*time.Second); err != nil {
		t.Errorf("after unblock (IPv4): %v", err)
	}
	if err := dial(tp.sub, "["+upAddr6+"]:9000", 2*time.Second); err != nil {
		t.Errorf("after unblock (IPv6): %v", err)
	}
	_, err = invoke(t, env, api.FirewallUnblock, &api.BlockRef{ID: "aa:bb:cc:00:00:05"})
	if e := apierr.From(err); e == nil || e.Kind != apierr.KindNotFound {
		t.Errorf("second unblock: %v, want 404", err)
	}
}
