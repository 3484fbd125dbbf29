package snmp

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/gosnmp/gosnmp"

	"routerd.dev/shared/netns"
)

// Bounds on what one request can make the agent do: a poller cannot make
// it allocate or compute without limit.
const (
	// MaxRequestVars is the most variable bindings a request may name; a
	// request with more is answered tooBig.
	MaxRequestVars = 128
	// MaxRepetitions caps a GetBulk's max-repetitions.
	MaxRepetitions = 256
	// MaxResponseVars caps the bindings of one GetBulk answer.
	MaxResponseVars = 2048
	// MaxResponse is the largest answer datagram; a GetBulk answer is cut
	// to fit, a Get or GetNext that does not fit is tooBig.
	MaxResponse = 65000
	// MaxRequest is the largest request read: larger datagrams are
	// dropped as parse errors.
	MaxRequest = 8192
)

// Stats count what the agent received (the SNMPv2-MIB snmp group's
// counters); they are served at 1.3.6.1.2.1.11 and shown by GET /snmp.
type Stats struct {
	InPkts, OutPkts, BadVersions, BadCommunityNames, ASNParseErrs, SetRefused atomic.Uint64
}

// Agent answers SNMP requests from a MIB for one community.
type Agent struct {
	MIB   *MIB
	Log   *slog.Logger
	Stats Stats

	community atomic.Pointer[string]

	mu     sync.Mutex
	conns  []net.PacketConn
	listen []string
	wg     sync.WaitGroup
}

// NewAgent is an agent serving m; it answers nothing until a community is
// set, and listens nowhere until Listen.
func NewAgent(m *MIB, log *slog.Logger) *Agent {
	if log == nil {
		log = slog.Default()
	}
	return &Agent{MIB: m, Log: log}
}

// SetCommunity sets the only community answered; "" answers none.
func (a *Agent) SetCommunity(c string) { a.community.Store(&c) }

// Running reports whether the agent's sockets are bound.
func (a *Agent) Running() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.conns) > 0
}

// Listening names the bound sockets, e.g. "udp:161, udp6:161".
func (a *Agent) Listening() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return strings.Join(a.listen, ", ")
}

// Listen binds UDP port on IPv4 and IPv6 inside ns (nil: the namespace
// the process runs in) and serves both until Close. A namespace without
// IPv6 is served on IPv4 alone; any other failure binds nothing.
func (a *Agent) Listen(ns *netns.NS, port int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.conns) > 0 {
		return errors.New("snmp: agent already listening")
	}
	var conns []net.PacketConn
	var names []string
	bind := func() error {
		for _, n := range []struct{ network, addr, name string }{
			{"udp4", fmt.Sprintf("0.0.0.0:%d", port), fmt.Sprintf("udp:%d", port)},
			{"udp6", fmt.Sprintf("[::]:%d", port), fmt.Sprintf("udp6:%d", port)},
		} {
			c, err := net.ListenPacket(n.network, n.addr)
			if err != nil {
				if n.network == "udp6" && errors.Is(err, syscall.EAFNOSUPPORT) {
					continue
				}
				return err
			}
			conns, names = append(conns, c), append(names, n.name)
		}
		return nil
	}
	var err error
	if ns != nil {
		err = ns.Do(bind)
	} else {
		err = bind()
	}
	if err != nil {
		for _, c := range conns {
			c.Close()
		}
		return err
	}
	a.conns, a.listen = conns, names
	for _, c := range conns {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.serve(c) }()
	}
	return nil
}

// Close unbinds the sockets and waits for their loops to end.
func (a *Agent) Close() {
	a.mu.Lock()
	conns := a.conns
	a.conns, a.listen = nil, nil
	a.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	a.wg.Wait()
}

func (a *Agent) serve(c net.PacketConn) {
	buf := make([]byte, 65536)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			a.Log.Warn("snmp: read", "err", err)
			continue
		}
		if out := a.Handle(buf[:n]); out != nil {
			if _, err := c.WriteTo(out, from); err != nil {
				a.Log.Debug("snmp: answer not sent", "to", from.String(), "err", err)
			}
		}
	}
}

// Handle answers one request datagram; nil is no answer (a wrong
// community, a version or PDU this agent does not serve, a datagram that
// does not parse).
func (a *Agent) Handle(req []byte) (out []byte) {
	a.Stats.InPkts.Add(1)
	if len(req) > MaxRequest {
		a.Stats.ASNParseErrs.Add(1)
		return nil
	}
	v, ok := peekVersion(req)
	if !ok {
		a.Stats.ASNParseErrs.Add(1)
		return nil
	}
	if v != gosnmp.Version1 && v != gosnmp.Version2c {
		a.Stats.BadVersions.Add(1)
		return nil
	}
	p, err := decode(req)
	if err != nil {
		a.Stats.ASNParseErrs.Add(1)
		return nil
	}
	switch p.PDUType {
	case gosnmp.GetRequest, gosnmp.GetNextRequest, gosnmp.GetBulkRequest, gosnmp.SetRequest:
	default:
		return nil // answers, traps, informs, reports: not for an agent
	}
	want := a.community.Load()
	if want == nil || *want == "" || subtle.ConstantTimeCompare([]byte(p.Community), []byte(*want)) != 1 {
		a.Stats.BadCommunityNames.Add(1)
		return nil
	}
	resp := &gosnmp.SnmpPacket{Version: p.Version, Community: p.Community, PDUType: gosnmp.GetResponse, RequestID: p.RequestID}
	switch {
	case len(p.Variables) > MaxRequestVars:
		resp.Error = gosnmp.TooBig
	case p.PDUType == gosnmp.GetRequest:
		a.get(p, resp)
	case p.PDUType == gosnmp.GetNextRequest:
		a.getNext(p, resp)
	case p.PDUType == gosnmp.GetBulkRequest:
		if p.Version == gosnmp.Version1 {
			a.Stats.ASNParseErrs.Add(1)
			return nil
		}
		a.getBulk(p, resp)
	case p.PDUType == gosnmp.SetRequest:
		// Read-only: v2c's notWritable, v1's noSuchName (RFC 2576 4.3).
		a.Stats.SetRefused.Add(1)
		resp.Variables = p.Variables
		resp.Error, resp.ErrorIndex = gosnmp.NotWritable, 1
		if p.Version == gosnmp.Version1 {
			resp.Error = gosnmp.NoSuchName
		}
	}
	out = a.encode(resp, p.PDUType == gosnmp.GetBulkRequest)
	if out != nil {
		a.Stats.OutPkts.Add(1)
	}
	return out
}

// encode marshals the answer; one too large is cut (GetBulk) or turned
// into tooBig with no bindings.
func (a *Agent) encode(resp *gosnmp.SnmpPacket, cut bool) []byte {
	for {
		b, err := resp.MarshalMsg()
		if err != nil {
			a.Log.Warn("snmp: answer not encoded", "err", err)
			resp.Variables, resp.Error, resp.ErrorIndex = nil, gosnmp.GenErr, 0
			if b, err = resp.MarshalMsg(); err != nil {
				return nil
			}
			return b
		}
		if len(b) <= MaxResponse {
			return b
		}
		if cut && len(resp.Variables) > 1 {
			keep := len(resp.Variables) * MaxResponse / len(b)
			resp.Variables = resp.Variables[:max(1, min(keep, len(resp.Variables)-1))]
			continue
		}
		resp.Variables, resp.Error, resp.ErrorIndex = nil, gosnmp.TooBig, 0
	}
}

func (a *Agent) get(p, resp *gosnmp.SnmpPacket) {
	resp.Variables = make([]gosnmp.SnmpPDU, 0, len(p.Variables))
	for i, in := range p.Variables {
		o, ok := ParseOID(in.Name)
		v := noSuchObject
		if ok {
			v = a.MIB.Get(o)
		}
		if p.Version == gosnmp.Version1 && (v.Exception() || v.Type == gosnmp.Counter64) {
			v1Error(p, resp, i)
			return
		}
		resp.Variables = append(resp.Variables, pdu(in.Name, v))
	}
}

func (a *Agent) getNext(p, resp *gosnmp.SnmpPacket) {
	resp.Variables = make([]gosnmp.SnmpPDU, 0, len(p.Variables))
	for i, in := range p.Variables {
		o, ok := ParseOID(in.Name)
		n, v, found := a.next(o, ok, p.Version)
		if !found {
			if p.Version == gosnmp.Version1 {
				v1Error(p, resp, i)
				return
			}
			resp.Variables = append(resp.Variables, gosnmp.SnmpPDU{Name: in.Name, Type: gosnmp.EndOfMibView})
			continue
		}
		resp.Variables = append(resp.Variables, pdu(n.String(), v))
	}
}

// next is the variable after o; v1 skips Counter64s, which it cannot
// carry (RFC 2576 4.1.2.1).
func (a *Agent) next(o OID, parsed bool, version gosnmp.SnmpVersion) (OID, Value, bool) {
	if !parsed {
		return nil, Value{}, false
	}
	for {
		n, v, ok := a.MIB.Next(o)
		if !ok || version != gosnmp.Version1 || v.Type != gosnmp.Counter64 {
			return n, v, ok
		}
		o = n
	}
}

// getBulk is RFC 3416 4.2.3: the non-repeaters once, then up to
// max-repetitions rounds over the repeaters, ending early when every
// repeater is past the end of the MIB.
func (a *Agent) getBulk(p, resp *gosnmp.SnmpPacket) {
	nonRep := min(int(p.NonRepeaters), len(p.Variables))
	reps := min(int(p.MaxRepetitions), MaxRepetitions)
	repeaters := len(p.Variables) - nonRep
	resp.Variables = make([]gosnmp.SnmpPDU, 0, min(nonRep+repeaters*reps, MaxResponseVars))
	for _, in := range p.Variables[:nonRep] {
		o, ok := ParseOID(in.Name)
		if n, v, found := a.next(o, ok, p.Version); found {
			resp.Variables = append(resp.Variables, pdu(n.String(), v))
		} else {
			resp.Variables = append(resp.Variables, gosnmp.SnmpPDU{Name: in.Name, Type: gosnmp.EndOfMibView})
		}
	}
	if repeaters == 0 {
		return
	}
	cur := make([]OID, repeaters)
	ended := make([]bool, repeaters)
	names := make([]string, repeaters)
	for j, in := range p.Variables[nonRep:] {
		o, ok := ParseOID(in.Name)
		cur[j], ended[j], names[j] = o, !ok, in.Name
	}
	for r := 0; r < reps; r++ {
		all := true
		for j := range cur {
			if len(resp.Variables) >= MaxResponseVars {
				return
			}
			if !ended[j] {
				n, v, found := a.MIB.Next(cur[j])
				if found {
					cur[j], names[j] = n, n.String()
					resp.Variables = append(resp.Variables, pdu(names[j], v))
					all = false
					continue
				}
				ended[j] = true
			}
			resp.Variables = append(resp.Variables, gosnmp.SnmpPDU{Name: names[j], Type: gosnmp.EndOfMibView})
		}
		if all {
			return
		}
	}
}

// v1Error is SNMPv1's answer to a name with no value: noSuchName at its
// position, the request's bindings returned as they came.
func v1Error(p, resp *gosnmp.SnmpPacket, i int) {
	resp.Variables = p.Variables
	resp.Error, resp.ErrorIndex = gosnmp.NoSuchName, uint8(min(i+1, 255))
}

func pdu(name string, v Value) gosnmp.SnmpPDU {
	return gosnmp.SnmpPDU{Name: name, Type: v.Type, Value: v.V}
}

// decode parses a datagram with gosnmp's decoder; a panic inside the
// codec on a hostile datagram is a parse error, not a crash.
func decode(b []byte) (p *gosnmp.SnmpPacket, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = nil, fmt.Errorf("snmp: decode: %v", r)
		}
	}()
	g := &gosnmp.GoSNMP{}
	return g.SnmpDecodePacket(b)
}

// peekVersion reads the message's version (SEQUENCE { INTEGER version,
// ...}) so that v3 messages never reach a decoder set up for communities.
func peekVersion(b []byte) (gosnmp.SnmpVersion, bool) {
	if len(b) < 2 || b[0] != 0x30 {
		return 0, false
	}
	i := 2
	if b[1]&0x80 != 0 {
		i += int(b[1] & 0x7f)
	}
	if i+3 > len(b) || b[i] != 0x02 || b[i+1] != 1 {
		return 0, false
	}
	return gosnmp.SnmpVersion(b[i+2]), true
}
