package v6

import (
	"encoding/binary"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// The fast path: a client's own SOLICIT, REQUEST, RENEW or REBIND (the
// messages that arrive by the thousand when a PON port comes back) read in
// place and answered into one buffer. Under perfdhcp load the library's
// general codec (an interface value and a slice per option, both ways) was
// half of the DHCPv6 handler's CPU.
//
// It accepts a strict subset: the options it knows, each well formed. Any
// other message (relayed, another type, an unknown or odd option) takes the
// general path through github.com/insomniacslk/dhcp, which stays the
// reference: TestFastMatchesLibrary checks both paths give byte-identical
// answers, and FuzzFastParse that the fast reader never accepts what the
// library refuses.

// fastReq is a message as the fast path reads it; slices point into the
// datagram.
type fastReq struct {
	typ    dhcpv6.MessageType
	xid    [3]byte
	cid    []byte // option 1
	sid    []byte // option 2, nil when absent
	rapid  bool
	na, pd []iaReq
}

// parseFast reads a message the fast path can answer, or reports false.
func parseFast(b []byte, r *fastReq) bool {
	if len(b) < 4 {
		return false
	}
	switch dhcpv6.MessageType(b[0]) {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
	default:
		return false
	}
	*r = fastReq{typ: dhcpv6.MessageType(b[0]), xid: [3]byte(b[1:4]), na: r.na[:0], pd: r.pd[:0]}
	ok := walk(b[4:], func(code uint16, v []byte) bool {
		switch dhcpv6.OptionCode(code) {
		case dhcpv6.OptionClientID:
			if r.cid == nil {
				r.cid = v
			}
		case dhcpv6.OptionServerID:
			if r.sid == nil {
				r.sid = v
			}
		case dhcpv6.OptionRapidCommit:
			r.rapid = true
			return len(v) == 0
		case dhcpv6.OptionElapsedTime:
			return len(v) == 2
		case dhcpv6.OptionORO:
			return len(v)%2 == 0
		case dhcpv6.OptionIANA:
			ia, ok := parseIA(v, false)
			r.na = append(r.na, ia)
			return ok
		case dhcpv6.OptionIAPD:
			ia, ok := parseIA(v, true)
			r.pd = append(r.pd, ia)
			return ok
		default:
			return false
		}
		return true
	})
	return ok && r.cid != nil
}

// parseIA reads an IA_NA or IA_PD body: the IAID, and the first address or
// prefix as the hint, as the library's OneAddress and Prefixes()[0] do.
func parseIA(v []byte, pd bool) (iaReq, bool) {
	if len(v) < 12 {
		return iaReq{}, false
	}
	ia := iaReq{id: [4]byte(v[:4])}
	first := true
	ok := walk(v[12:], func(code uint16, o []byte) bool {
		switch {
		case code == uint16(dhcpv6.OptionStatusCode):
			return len(o) >= 2
		case !pd && code == uint16(dhcpv6.OptionIAAddr):
			if len(o) != 24 {
				return false
			}
			if first {
				ia.addr = netip.AddrFrom16([16]byte(o[:16]))
			}
			first = false
		case pd && code == uint16(dhcpv6.OptionIAPrefix):
			if len(o) != 25 || o[8] > 128 {
				return false
			}
			if first && o[8] != 0 { // length 0 is "no prefix" to the library
				ia.prefix = netip.PrefixFrom(netip.AddrFrom16([16]byte(o[9:25])).Unmap(), int(o[8]))
			}
			first = false
		default:
			return false
		}
		return true
	})
	return ia, ok
}

// walk calls fn for each option (code, value) of b; false from fn, or an
// option running past the end, stops it with false.
func walk(b []byte, fn func(code uint16, v []byte) bool) bool {
	for len(b) > 0 {
		if len(b) < 4 {
			return false
		}
		code, n := binary.BigEndian.Uint16(b), int(binary.BigEndian.Uint16(b[2:]))
		if 4+n > len(b) {
			return false
		}
		if !fn(code, b[4:4+n]) {
			return false
		}
		b = b[4+n:]
	}
	return true
}

// handleFast answers a message parseFast accepted; the boolean is false
// when the message must take the general path after all.
func (s *Server) handleFast(iface string, peer *net.UDPAddr, r *fastReq) (*Reply, bool) {
	duid, err := dhcpv6.DUIDFromBytes(r.cid)
	if err != nil {
		return nil, false
	}
	via, _ := netip.AddrFromSlice(peer.IP)
	via = via.Unmap()
	s.tab.Lock()
	defer s.tab.Unlock()
	x := &exchange{c: s.cur, iface: iface, typ: r.typ, duid: duidString(duid), mac: s.clientMAC(duid, via, nil, nil), via: via, now: s.now()}
	if x.n = x.c.byIface[iface]; x.n == nil {
		return nil, true
	}
	hasSID := r.sid != nil
	if hasSID && string(r.sid) != string(s.sidBytes) {
		return nil, true // addressed to another server
	}
	typ := dhcpv6.MessageTypeReply
	switch r.typ {
	case dhcpv6.MessageTypeSolicit:
		if hasSID {
			return nil, true
		}
		if r.rapid {
			x.commit = true
		} else {
			typ = dhcpv6.MessageTypeAdvertise
		}
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew:
		if !hasSID {
			return nil, true
		}
		x.commit = true
	case dhcpv6.MessageTypeRebind:
		if hasSID {
			return nil, true
		}
		x.commit = true
	}
	res := s.assign(x, r.na, r.pd)

	b := make([]byte, 0, 256)
	b = append(b, byte(typ), r.xid[0], r.xid[1], r.xid[2])
	b = appendOpt(b, dhcpv6.OptionClientID, duid.ToBytes())
	if typ == dhcpv6.MessageTypeReply && r.typ == dhcpv6.MessageTypeSolicit {
		b = appendOpt(b, dhcpv6.OptionRapidCommit, nil)
	}
	for _, ia := range res {
		b = appendIA(b, ia)
	}
	b = append(b, s.sidTLV...)
	b = append(b, x.n.dnsTLV...)
	b = append(b, x.c.domainTLV...)
	x.out.Resp = b
	x.out.Dst = &net.UDPAddr{IP: peer.IP, Port: dhcpv6.DefaultClientPort, Zone: peer.Zone}
	return &x.out, true
}

func appendOpt(b []byte, code dhcpv6.OptionCode, v []byte) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	b = binary.BigEndian.AppendUint16(b, uint16(len(v)))
	return append(b, v...)
}

func secs(d time.Duration) uint32 { return uint32(d.Round(time.Second) / time.Second) }

// appendIA writes one IA_NA or IA_PD answer as addIAs does through the
// library.
func appendIA(b []byte, r iaResult) []byte {
	code := dhcpv6.OptionIANA
	if r.pd {
		code = dhcpv6.OptionIAPD
	}
	b = binary.BigEndian.AppendUint16(b, uint16(code))
	lenAt := len(b)
	b = append(b, 0, 0)
	b = append(b, r.id[:]...)
	if r.ok {
		b = binary.BigEndian.AppendUint32(b, secs(r.pref/2))
		b = binary.BigEndian.AppendUint32(b, secs(r.pref*4/5))
	} else {
		b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	}
	switch {
	case !r.ok:
		st, msg := iana.StatusNoAddrsAvail, noAddrs
		if r.pd {
			st, msg = iana.StatusNoPrefixAvail, noPrefixes
		}
		b = binary.BigEndian.AppendUint16(b, uint16(dhcpv6.OptionStatusCode))
		b = binary.BigEndian.AppendUint16(b, uint16(2+len(msg)))
		b = binary.BigEndian.AppendUint16(b, uint16(st))
		b = append(b, msg...)
	case !r.pd:
		b = appendAddr(b, r.addr, r.pref, r.valid)
		if r.zero.IsValid() {
			b = appendAddr(b, r.zero, 0, 0)
		}
	default:
		b = binary.BigEndian.AppendUint16(b, uint16(dhcpv6.OptionIAPrefix))
		b = binary.BigEndian.AppendUint16(b, 25)
		b = binary.BigEndian.AppendUint32(b, secs(r.pref))
		b = binary.BigEndian.AppendUint32(b, secs(r.valid))
		b = append(b, byte(r.prefix.Bits()))
		a := r.prefix.Addr().As16()
		b = append(b, a[:]...)
	}
	binary.BigEndian.PutUint16(b[lenAt:], uint16(len(b)-lenAt-2))
	return b
}

func appendAddr(b []byte, a netip.Addr, pref, valid time.Duration) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(dhcpv6.OptionIAAddr))
	b = binary.BigEndian.AppendUint16(b, 24)
	v := a.As16()
	b = append(b, v[:]...)
	b = binary.BigEndian.AppendUint32(b, secs(pref))
	return binary.BigEndian.AppendUint32(b, secs(valid))
}

// tlv is an option as the library writes it, for the parts of every answer
// that only change with the configuration.
func tlv(o dhcpv6.Option) []byte {
	m := &dhcpv6.Message{}
	m.AddOption(o)
	return m.ToBytes()[4:]
}
