package huawei_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"routerd.dev/services/olt/huawei"
	"routerd.dev/services/olt/sim"
)

// rig is a simulated OLT and a driver connected to it.
type rig struct {
	srv *sim.Server
	olt *sim.OLT
	drv *huawei.Driver
}

func hostPort(t testing.TB, addr string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// newRig starts a simulator with oc and a driver over proto; edit may
// adjust the driver's configuration.
func newRig(t testing.TB, proto string, oc sim.OLTConfig, edit func(*huawei.Config)) *rig {
	t.Helper()
	srv, err := sim.Start(context.Background(), sim.Config{OLTs: []sim.OLTConfig{oc}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	addr := srv.TelnetAddr()
	if proto == "ssh" {
		addr = srv.SSHAddr()
	}
	host, port := hostPort(t, addr)
	cfg := huawei.Config{Host: host, Port: port, Protocol: proto, User: "root", Pass: "admin"}
	if edit != nil {
		edit(&cfg)
	}
	drv, err := huawei.New(cfg, huawei.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return &rig{srv: srv, olt: srv.OLT(0), drv: drv}
}

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var protocols = []string{"telnet", "ssh"}

// waitFor polls cond with a short backoff and fails the test when within
// passes first. (This module stands alone, without routerd's shared
// testenv, whose Eventually this mirrors.)
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for gap := time.Millisecond; !cond(); gap = min(2*gap, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(gap)
	}
}
