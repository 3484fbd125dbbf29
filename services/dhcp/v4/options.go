package v4

import (
	"net/netip"
	"time"
)

// encode writes the answer the handler chose. The header follows RFC 2131
// table 3; options: the message type and server identifier first, the
// configuration and lease times on OFFER and ACK, option 61 echoed (RFC
// 6842) and option 82 echoed last and unchanged (RFC 3046 2.2).
func (x *exchange) encode(buf []byte) []byte {
	a := newAnswer(buf, &x.req, x.raw, x.typ)
	n := x.n
	a.optAddrs(optServerID, n.cfg.Gateway)
	switch {
	case x.typ == msgNak:
		if x.req.giaddr.IsValid() {
			a.setBroadcast() // RFC 2131 4.3.2: a relayed NAK is broadcast by the relay
		}
		a.optBytes(optMessage, []byte(x.nakMsg))
	default:
		if x.req.msgType == msgInform {
			a.setAddr(12, x.req.ciaddr)
		} else {
			a.setAddr(16, x.yiaddr)
			// RFC 2131 3.4: no lease time in an answer to INFORM.
			lt := time.Duration(n.lease) * time.Second
			if x.left > 0 {
				lt = x.left
			}
			a.optUint32(optLeaseTime, uint32(lt/time.Second))
			a.optUint32(optRenewal, uint32(lt/2/time.Second))
			a.optUint32(optRebinding, uint32(lt*7/8/time.Second))
		}
		a.optBytes(optSubnetMask, n.mask)
		a.optAddrs(optRouter, n.cfg.Gateway)
		a.optAddrs(optBroadcast, n.bcast)
		if len(n.dns) > 0 {
			a.optAddrs(optDNS, n.dns...)
		}
		if x.c.domain != "" {
			a.optBytes(optDomain, []byte(x.c.domain))
		}
		if h := x.hostname(); h != "" && x.req.msgType != msgInform {
			a.optBytes(optHostname, []byte(h))
		}
	}
	if len(x.req.clientID) > 0 {
		a.optBytes(optClientID, x.req.clientID)
	}
	if x.info != nil {
		a.optBytes(optRelayInfo, x.info.Raw)
	}
	return a.bytes()
}

// destination follows RFC 2131 4.1: to the relay when relayed; to the
// client's address when it has one; otherwise broadcast on the interface
// (the client has no address yet, and broadcasting avoids writing its MAC
// into the ARP table by hand).
func (x *exchange) destination() netip.AddrPort {
	req := &x.req
	if req.giaddr.IsValid() {
		return netip.AddrPortFrom(req.giaddr, 67)
	}
	if x.typ != msgNak && req.ciaddr.IsValid() {
		return netip.AddrPortFrom(req.ciaddr, 68)
	}
	return netip.AddrPortFrom(bcast, 68)
}

var bcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})
