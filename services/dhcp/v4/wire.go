package v4

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// The DHCPv4 wire format (RFC 2131 section 2, RFC 2132), read and written
// in place. The engine answers every request on the receive path, and the
// general codec of github.com/insomniacslk/dhcp (a map of options, sorted
// on output, a buffer per field) measured a fifth of the engine's CPU under
// perfdhcp load; this reads only what the server uses, as sub-slices of the
// datagram, and writes an answer into one buffer. The library stays the
// reference: the tests build requests and read answers with it.

const (
	hdrLen    = 236 // fixed BOOTP header, up to the magic cookie
	minPacket = 300 // RFC 1542 3.1.1: answers are padded to the BOOTP size
	offSname  = 44
	offFile   = 108
)

var (
	magic      = [4]byte{99, 130, 83, 99}
	zeroHeader [hdrLen + 4]byte
)

// Option codes the server reads or writes.
const (
	optPad        = 0
	optSubnetMask = 1
	optRouter     = 3
	optDNS        = 6
	optHostname   = 12
	optDomain     = 15
	optBroadcast  = 28
	optRequested  = 50
	optLeaseTime  = 51
	optOverload   = 52
	optMsgType    = 53
	optServerID   = 54
	optMessage    = 56
	optRenewal    = 58
	optRebinding  = 59
	optClientID   = 61
	optRelayInfo  = 82
	optEnd        = 255
)

// Message types (option 53).
const (
	msgDiscover = 1
	msgOffer    = 2
	msgRequest  = 3
	msgDecline  = 4
	msgAck      = 5
	msgNak      = 6
	msgRelease  = 7
	msgInform   = 8
)

var errMalformed = errors.New("malformed DHCPv4 packet")

// request is one DHCPv4 request as the server reads it. Byte slices point
// into the datagram, which the receive loop reuses: whatever outlives
// Handle is copied (leases keep strings).
type request struct {
	op, htype, hlen byte
	xid             [4]byte
	flags           uint16
	ciaddr, giaddr  netip.Addr // invalid when 0.0.0.0
	chaddr          [6]byte
	msgType         byte
	requested       netip.Addr // option 50
	serverID        netip.Addr // option 54
	hostname        []byte     // option 12
	clientID        []byte     // option 61
	relay           []byte     // option 82, whole
}

// parse reads a request. It refuses what is not a BOOTREQUEST-shaped DHCP
// message: too short, no magic cookie, an option running past the end.
func parse(b []byte, r *request) error {
	*r = request{}
	if len(b) < hdrLen+4 || [4]byte(b[hdrLen:hdrLen+4]) != magic {
		return errMalformed
	}
	r.op, r.htype, r.hlen = b[0], b[1], b[2]
	r.xid = [4]byte(b[4:8])
	r.flags = binary.BigEndian.Uint16(b[10:12])
	r.ciaddr = addrAt(b[12:16])
	r.giaddr = addrAt(b[24:28])
	copy(r.chaddr[:], b[28:34])
	overload, err := r.options(b[hdrLen+4:], true)
	if err != nil {
		return err
	}
	// RFC 2131 4.1: option 52 says the file and sname fields carry options
	// too, read after the options field (file first).
	if overload&1 != 0 {
		if _, err := r.options(b[offFile:hdrLen], false); err != nil {
			return err
		}
	}
	if overload&2 != 0 {
		if _, err := r.options(b[offSname:offFile], false); err != nil {
			return err
		}
	}
	if r.msgType == 0 {
		return errMalformed // BOOTP, not DHCP
	}
	return nil
}

// options reads one options area; it returns option 52's value when top.
// A repeated option is concatenated (RFC 3396), which copies; it is rare.
func (r *request) options(b []byte, top bool) (overload byte, err error) {
	for i := 0; i < len(b); {
		code := b[i]
		if code == optPad {
			i++
			continue
		}
		if code == optEnd {
			return overload, nil
		}
		if i+2 > len(b) || i+2+int(b[i+1]) > len(b) {
			return 0, errMalformed
		}
		v := b[i+2 : i+2+int(b[i+1])]
		i += 2 + len(v)
		switch code {
		case optMsgType:
			if len(v) == 1 {
				r.msgType = v[0]
			}
		case optRequested:
			if len(v) == 4 {
				r.requested = addrAt(v)
			}
		case optServerID:
			if len(v) == 4 {
				r.serverID = addrAt(v)
			}
		case optHostname:
			r.hostname = concat(r.hostname, v)
		case optClientID:
			r.clientID = concat(r.clientID, v)
		case optRelayInfo:
			r.relay = concat(r.relay, v)
		case optOverload:
			if top && len(v) == 1 {
				overload = v[0]
			}
		}
	}
	return overload, nil
}

func concat(have, v []byte) []byte {
	if have == nil {
		return v
	}
	return append(append([]byte(nil), have...), v...)
}

// addrAt is the IPv4 address in b[0:4]; 0.0.0.0 is invalid (absent).
func addrAt(b []byte) netip.Addr {
	a := netip.AddrFrom4([4]byte(b[:4]))
	if a.IsUnspecified() {
		return netip.Addr{}
	}
	return a
}

// answer is a DHCPv4 answer being written: the header, then options
// appended in order, then End and padding.
type answer struct{ b []byte }

// newAnswer starts a BOOTREPLY to req of message type t. RFC 2131 table 3:
// xid, flags, giaddr and chaddr are copied from the request.
func newAnswer(buf []byte, req *request, raw []byte, t byte) answer {
	if cap(buf) < 576 {
		buf = make([]byte, 0, 576) // the minimum every host must accept
	}
	b := append(buf[:0], zeroHeader[:]...)
	b[0], b[1], b[2] = 2, req.htype, req.hlen
	copy(b[4:8], req.xid[:])
	binary.BigEndian.PutUint16(b[10:12], req.flags)
	if req.giaddr.IsValid() {
		a := req.giaddr.As4()
		copy(b[24:28], a[:])
	}
	copy(b[28:44], raw[28:44])
	copy(b[hdrLen:], magic[:])
	a := answer{b}
	a.opt(optMsgType, t)
	return a
}

func (a *answer) setAddr(off int, ip netip.Addr) {
	v := ip.As4()
	copy(a.b[off:off+4], v[:])
}

func (a *answer) setBroadcast() { a.b[10] |= 0x80 }

func (a *answer) opt(code byte, v ...byte) { a.optBytes(code, v) }

// optBytes appends an option, split into 255-byte pieces when longer
// (RFC 3396).
func (a *answer) optBytes(code byte, v []byte) {
	for {
		n := min(len(v), 255)
		a.b = append(a.b, code, byte(n))
		a.b = append(a.b, v[:n]...)
		if v = v[n:]; len(v) == 0 {
			return
		}
	}
}

func (a *answer) optAddrs(code byte, ips ...netip.Addr) {
	a.b = append(a.b, code, byte(4*len(ips)))
	for _, ip := range ips {
		v := ip.As4()
		a.b = append(a.b, v[:]...)
	}
}

func (a *answer) optUint32(code byte, v uint32) {
	a.b = append(a.b, code, 4)
	a.b = binary.BigEndian.AppendUint32(a.b, v)
}

// bytes ends the options and pads to the BOOTP minimum.
func (a *answer) bytes() []byte {
	a.b = append(a.b, optEnd)
	for len(a.b) < minPacket {
		a.b = append(a.b, optPad)
	}
	return a.b
}
