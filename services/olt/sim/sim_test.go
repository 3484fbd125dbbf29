package sim_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"routerd.dev/services/olt/sim"
)

// cli is a minimal telnet user of the simulator for its own tests.
type cli struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialCLI(t *testing.T, addr, prompt string) *cli {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	x := &cli{t: t, c: c, r: bufio.NewReader(c)}
	x.until("User name:")
	x.send("root")
	x.until("User password:")
	x.send("admin")
	x.until(prompt + ">")
	return x
}

func (x *cli) send(s string) { fmt.Fprint(x.c, s+"\r\n") }

func (x *cli) until(suffixes ...string) string {
	x.t.Helper()
	var b strings.Builder
	done := func() bool {
		for _, s := range suffixes {
			if strings.HasSuffix(strings.TrimRight(b.String(), " "), s) {
				return true
			}
		}
		return false
	}
	for !done() {
		c, err := x.r.ReadByte()
		if err != nil {
			x.t.Fatalf("reading for %q: %v (got %q)", suffixes, err, b.String())
		}
		b.WriteByte(c)
	}
	return b.String()
}

// clock is an injected clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestSeveralOLTsAndMovingReadings(t *testing.T) {
	clk := &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	srv, err := sim.Start(context.Background(), sim.Config{Now: clk.now, OLTs: []sim.OLTConfig{{Name: "A"}, {Name: "B", Model: sim.MA5608T}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if srv.OLT(0).TelnetAddr() == srv.OLT(1).TelnetAddr() {
		t.Fatal("two OLTs share an address")
	}
	b := dialCLI(t, srv.OLT(1).TelnetAddr(), "B")
	b.send("display version")
	if out := b.until("B>"); !strings.Contains(out, "PRODUCT : MA5608T") {
		t.Errorf("version of B:\n%s", out)
	}
	a := dialCLI(t, srv.OLT(0).TelnetAddr(), "A")
	read := func() string {
		a.send("display port state 0")
		out := a.until("A(config-if-gpon-0/1)#")
		for _, l := range strings.Split(out, "\r\n") {
			if strings.Contains(l, "TX power") {
				return l
			}
		}
		t.Fatalf("no TX power in %q", out)
		return ""
	}
	a.send("enable")
	a.until("A#")
	a.send("config")
	a.until("A(config)#")
	a.send("interface gpon 0/1")
	a.until("A(config-if-gpon-0/1)#")
	first := read()
	clk.add(10 * time.Minute)
	if second := read(); second == first {
		t.Errorf("optical reading did not move in 10 minutes: %q", first)
	}
	a.send("bogus")
	if out := a.until("A(config-if-gpon-0/1)#"); !strings.Contains(out, "% Unknown command, the error locates at '^'") {
		t.Errorf("unknown command answer:\n%s", out)
	}
}

func TestRefusedLoginAnswers(t *testing.T) {
	srv, err := sim.Start(context.Background(), sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c, err := net.Dial("tcp", srv.TelnetAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	x := &cli{t: t, c: c, r: bufio.NewReader(c)}
	x.until("User name:")
	x.send("root")
	x.until("User password:")
	x.send("nope")
	if out := x.until("User name:"); !strings.Contains(out, "Username or password invalid.") {
		t.Errorf("refusal:\n%q", out)
	}
}
