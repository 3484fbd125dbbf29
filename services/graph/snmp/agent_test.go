package snmp

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gosnmp/gosnmp"
)

const community = "test-ro"

// testAgent serves the system group and a client table of n rows, every
// third without counters.
func testAgent(t testing.TB, n int) (*Agent, *ClientTable) {
	t.Helper()
	ct := &ClientTable{}
	ct.Set(NewClientRows(testRows(n)))
	a := NewAgent(nil, nil)
	started := time.Unix(1000, 0)
	sys := SystemGroup(func() System { return System{Descr: "d", Location: "loc"} }, started, func() time.Time { return started.Add(12340 * time.Millisecond) })
	a.MIB = NewMIB(append([]Subtree{sys, SNMPGroup(&a.Stats)}, ct.Subtrees()...)...)
	a.SetCommunity(community)
	return a, ct
}

func testRows(n int) []ClientRow {
	rows := make([]ClientRow, n)
	for i := range rows {
		// In reverse, so that NewClientRows has to sort them.
		j := n - 1 - i
		rows[i] = ClientRow{MAC: [6]byte{2, 0, byte(j >> 24), byte(j >> 16), byte(j >> 8), byte(j)}, IP: [4]byte{10, byte(j >> 16), byte(j >> 8), byte(j)}, HasIP: true,
			Hostname: fmt.Sprintf("cpe-%d", j), Plan: "gold", Counted: j%3 != 0, Down: uint64(j) * 1000, Up: uint64(j)}
	}
	return rows
}

// ask sends one v2c request (askV: v1 when v1) through Handle and decodes the answer; nil when
// there is none.
func ask(t testing.TB, a *Agent, p *gosnmp.SnmpPacket) *gosnmp.SnmpPacket {
	return askV(t, a, false, p)
}

func askV(t testing.TB, a *Agent, v1 bool, p *gosnmp.SnmpPacket) *gosnmp.SnmpPacket {
	t.Helper()
	if p.Community == "" {
		p.Community = community
	}
	if !v1 {
		p.Version = gosnmp.Version2c
	}
	req, err := p.MarshalMsg()
	if err != nil {
		t.Fatal(err)
	}
	out := a.Handle(req)
	if out == nil {
		return nil
	}
	if len(out) > MaxResponse {
		t.Fatalf("answer of %d bytes", len(out))
	}
	resp, err := (&gosnmp.GoSNMP{}).SnmpDecodePacket(out)
	if err != nil {
		t.Fatal(err)
	}
	if resp.RequestID != p.RequestID || resp.PDUType != gosnmp.GetResponse {
		t.Fatalf("answer %v to request %d", resp.PDUType, p.RequestID)
	}
	return resp
}

func vars(names ...string) []gosnmp.SnmpPDU {
	out := make([]gosnmp.SnmpPDU, len(names))
	for i, n := range names {
		out[i] = gosnmp.SnmpPDU{Name: n, Type: gosnmp.Null}
	}
	return out
}

func TestGetExceptions(t *testing.T) {
	a, _ := testAgent(t, 3)
	r := ask(t, a, &gosnmp.SnmpPacket{PDUType: gosnmp.GetRequest, RequestID: 7, Variables: vars(
		".1.3.6.1.2.1.1.6.0",                     // sysLocation.0
		".1.3.6.1.2.1.1.6",                       // the object, not its instance
		".1.3.6.1.2.1.1.6.1",                     // no such instance
		".1.3.6.1.2.1.99.0",                      // no such object
		".1.3.6.1.2.1.1.3.0",                     // sysUpTime.0
		".1.3.6.1.4.1.32473.2.2.1.3.2.0.0.0.0.1", // hostname of the second client
		".1.3.6.1.4.1.32473.2.2.1.5.2.0.0.0.0.0", // the first client has no counters
		".1.3.6.1.4.1.32473.2.2.1.9.2.0.0.0.0.1", // no such column
		".1.3.6.1.4.1.32473.2.1.0",               // the client count
	)})
	want := []struct {
		typ gosnmp.Asn1BER
		val any
	}{
		{gosnmp.OctetString, []byte("loc")}, {gosnmp.NoSuchInstance, nil}, {gosnmp.NoSuchInstance, nil}, {gosnmp.NoSuchObject, nil},
		{gosnmp.TimeTicks, uint32(1234)}, {gosnmp.OctetString, []byte("cpe-1")}, {gosnmp.NoSuchInstance, nil}, {gosnmp.NoSuchObject, nil},
		{gosnmp.Gauge32, uint(3)},
	}
	if len(r.Variables) != len(want) {
		t.Fatalf("%d bindings: %v", len(r.Variables), r.Variables)
	}
	for i, w := range want {
		v := r.Variables[i]
		if v.Type != w.typ || w.val != nil && fmt.Sprint(v.Value) != fmt.Sprint(w.val) {
			t.Errorf("%s: %v %v, want %v %v", v.Name, v.Type, v.Value, w.typ, w.val)
		}
	}
}

// TestWalkOrder: GetNext from the root visits every variable in OID
// order, column by column, leaving out the counter cells of the clients
// without counters, and ends with endOfMibView.
func TestWalkOrder(t *testing.T) {
	const n = 7
	a, _ := testAgent(t, n)
	var names []string
	var prev OID
	cur := ".1.3.6.1.4.1.32473"
	for range 1000 {
		r := ask(t, a, &gosnmp.SnmpPacket{PDUType: gosnmp.GetNextRequest, RequestID: 1, Variables: vars(cur)})
		v := r.Variables[0]
		if v.Type == gosnmp.EndOfMibView {
			break
		}
		o, _ := ParseOID(v.Name)
		if prev != nil && o.Compare(prev) <= 0 {
			t.Fatalf("%s after %s", o, prev)
		}
		prev, cur = o, v.Name
		names = append(names, v.Name)
	}
	counted := 0
	for j := range n {
		if j%3 != 0 {
			counted++
		}
	}
	if want := 1 + 4*n + 2*counted; len(names) != want {
		t.Fatalf("%d variables, want %d:\n%s", len(names), want, strings.Join(names, "\n"))
	}
	if names[0] != ".1.3.6.1.4.1.32473.2.1.0" || names[1] != ".1.3.6.1.4.1.32473.2.2.1.1.2.0.0.0.0.0" || names[n+1] != ".1.3.6.1.4.1.32473.2.2.1.2.2.0.0.0.0.0" {
		t.Fatalf("order: %v", names[:n+2])
	}
	// v1 GetNext skips the Counter64 columns entirely.
	r := askV(t, a, true, &gosnmp.SnmpPacket{Version: gosnmp.Version1, PDUType: gosnmp.GetNextRequest, RequestID: 2, Variables: vars(".1.3.6.1.4.1.32473.2.2.1.4.2.0.0.0.0.6")})
	if r.Error != gosnmp.NoSuchName || r.ErrorIndex != 1 {
		t.Fatalf("v1 past the last v1 variable: %v %d %v", r.Error, r.ErrorIndex, r.Variables)
	}
}

func TestGetBulk(t *testing.T) {
	a, _ := testAgent(t, 50)
	// One non-repeater and two repeaters, 5 rounds.
	r := ask(t, a, &gosnmp.SnmpPacket{PDUType: gosnmp.GetBulkRequest, RequestID: 3, NonRepeaters: 1, MaxRepetitions: 5,
		Variables: vars(".1.3.6.1.2.1.1.5", ".1.3.6.1.4.1.32473.2.2.1.3", ".1.3.6.1.4.1.32473.2.2.1.6.2.0.0.0.0.48")})
	if len(r.Variables) != 1+2*5 {
		t.Fatalf("%d bindings: %v", len(r.Variables), r.Variables)
	}
	if r.Variables[0].Name != ".1.3.6.1.2.1.1.5.0" || r.Variables[1].Name != ".1.3.6.1.4.1.32473.2.2.1.3.2.0.0.0.0.0" || r.Variables[3].Name != ".1.3.6.1.4.1.32473.2.2.1.3.2.0.0.0.0.1" {
		t.Fatalf("bindings: %v", r.Variables)
	}
	// The second repeater runs off the end after row 49 and stays there.
	if r.Variables[2].Name != ".1.3.6.1.4.1.32473.2.2.1.6.2.0.0.0.0.49" || r.Variables[4].Type != gosnmp.EndOfMibView || r.Variables[10].Type != gosnmp.EndOfMibView {
		t.Fatalf("the end: %v", r.Variables)
	}
}

// TestBounds: what a poller asks for cannot grow an answer without
// bound.
func TestBounds(t *testing.T) {
	a, _ := testAgent(t, 20000)
	r := ask(t, a, &gosnmp.SnmpPacket{PDUType: gosnmp.GetBulkRequest, RequestID: 4, MaxRepetitions: 1 << 30, Variables: vars(".1.3.6.1.4.1.32473.2.2.1.3", ".1.3.6.1.4.1.32473.2.2.1.4")})
	if len(r.Variables) == 0 || len(r.Variables) > MaxResponseVars || len(r.Variables) > 2*MaxRepetitions {
		t.Fatalf("%d bindings for max-repetitions 2^30", len(r.Variables))
	}
	many := make([]string, MaxRequestVars+1)
	for i := range many {
		many[i] = ".1.3.6.1.2.1.1.1.0"
	}
	if r := ask(t, a, &gosnmp.SnmpPacket{PDUType: gosnmp.GetRequest, RequestID: 5, Variables: vars(many...)}); r.Error != gosnmp.TooBig || len(r.Variables) != 0 {
		t.Fatalf("%d names: %v with %d bindings", len(many), r.Error, len(r.Variables))
	}
	// Rows of long hostnames: the bulk answer is cut to fit a datagram.
	rows := testRows(3000)
	for i := range rows {
		rows[i].Hostname = strings.Repeat("h", 200)
	}
	a2, ct := testAgent(t, 0)
	ct.Set(NewClientRows(rows))
	r = ask(t, a2, &gosnmp.SnmpPacket{PDUType: gosnmp.GetBulkRequest, RequestID: 6, MaxRepetitions: MaxRepetitions, Variables: vars(".1.3.6.1.4.1.32473.2.2.1.3", ".1.3.6.1.4.1.32473.2.2.1.3", ".1.3.6.1.4.1.32473.2.2.1.3")})
	if len(r.Variables) == 0 || len(r.Variables) >= 3*MaxRepetitions {
		t.Fatalf("%d bindings of 200-byte hostnames", len(r.Variables))
	}
}

func TestRefused(t *testing.T) {
	a, _ := testAgent(t, 1)
	if r := ask(t, a, &gosnmp.SnmpPacket{Community: "wrong", PDUType: gosnmp.GetRequest, RequestID: 1, Variables: vars(".1.3.6.1.2.1.1.1.0")}); r != nil {
		t.Fatal("a wrong community was answered")
	}
	if a.Stats.BadCommunityNames.Load() != 1 {
		t.Fatalf("bad communities counted: %d", a.Stats.BadCommunityNames.Load())
	}
	set := vars(".1.3.6.1.2.1.1.6.0")
	set[0].Type, set[0].Value = gosnmp.OctetString, "x"
	r := ask(t, a, &gosnmp.SnmpPacket{PDUType: gosnmp.SetRequest, RequestID: 2, Variables: set})
	if r.Error != gosnmp.NotWritable || r.ErrorIndex != 1 {
		t.Fatalf("set: %v %d", r.Error, r.ErrorIndex)
	}
	if r := askV(t, a, true, &gosnmp.SnmpPacket{Version: gosnmp.Version1, PDUType: gosnmp.SetRequest, RequestID: 3, Variables: set}); r.Error != gosnmp.NoSuchName {
		t.Fatalf("v1 set: %v", r.Error)
	}
	if v := a.MIB.Get(MustOID("1.3.6.1.2.1.1.6.0")); string(v.V.(string)) != "loc" {
		t.Fatalf("sysLocation after the sets: %v", v)
	}
	// v1 Get of a Counter64 is noSuchName at its position.
	r = askV(t, a, true, &gosnmp.SnmpPacket{Version: gosnmp.Version1, PDUType: gosnmp.GetRequest, RequestID: 4, Variables: vars(".1.3.6.1.2.1.1.5.0", ".1.3.6.1.4.1.32473.2.2.1.6.2.0.0.0.0.0")})
	if r == nil || r.Error != gosnmp.NoSuchName || r.ErrorIndex != 2 {
		t.Fatalf("v1 get of a Counter64: %+v", r)
	}
	// A disabled agent (no community) answers no one, not even "".
	a.SetCommunity("")
	if r := ask(t, a, &gosnmp.SnmpPacket{Community: "", PDUType: gosnmp.GetRequest, RequestID: 5, Variables: vars(".1.3.6.1.2.1.1.1.0")}); r != nil {
		t.Fatal("answered without a community")
	}
}

// TestGarbage: datagrams that are not SNMP, truncated or v3 are dropped
// and counted, never answered and never a panic.
func TestGarbage(t *testing.T) {
	a, _ := testAgent(t, 10)
	good, _ := (&gosnmp.SnmpPacket{Version: gosnmp.Version2c, Community: community, PDUType: gosnmp.GetBulkRequest, RequestID: 9, MaxRepetitions: 3, Variables: vars(".1.3")}).MarshalMsg()
	if a.Handle(good) == nil {
		t.Fatal("the well-formed request was not answered")
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		b := append([]byte(nil), good...)
		switch i % 3 {
		case 0:
			b = b[:rnd.IntN(len(b))]
		case 1:
			b[rnd.IntN(len(b))] = byte(rnd.IntN(256))
		default:
			b = make([]byte, rnd.IntN(100))
			for j := range b {
				b[j] = byte(rnd.IntN(256))
			}
		}
		if out := a.Handle(b); out != nil && len(out) > MaxResponse {
			t.Fatalf("answer of %d bytes", len(out))
		}
	}
	v3 := append([]byte(nil), good...)
	v3[4] = 3
	before := a.Stats.BadVersions.Load()
	if a.Handle(v3) != nil || a.Stats.BadVersions.Load() != before+1 {
		t.Fatal("a v3 message was answered or not counted")
	}
}
