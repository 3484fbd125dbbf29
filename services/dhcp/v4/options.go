package v4

import (
	"net"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// reply starts an answer of type t: it copies what RFC 2131 table 3 says to
// copy (xid, flags, giaddr, chaddr) and identifies the server.
func (x *exchange) reply(t dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	r := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        x.req.HWType,
		HopCount:      0,
		TransactionID: x.req.TransactionID,
		Flags:         x.req.Flags,
		ClientIPAddr:  net.IPv4zero,
		YourIPAddr:    net.IPv4zero,
		ServerIPAddr:  net.IPv4zero,
		GatewayIPAddr: x.req.GatewayIPAddr,
		ClientHWAddr:  x.req.ClientHWAddr,
		Options:       dhcpv4.Options{},
	}
	if r.GatewayIPAddr == nil {
		r.GatewayIPAddr = net.IPv4zero
	}
	r.UpdateOption(dhcpv4.OptMessageType(t))
	r.UpdateOption(dhcpv4.OptServerIdentifier(x.n.gateway))
	if t == dhcpv4.MessageTypeAck && x.req.MessageType() == dhcpv4.MessageTypeInform {
		r.ClientIPAddr = x.req.ClientIPAddr
	}
	if t == dhcpv4.MessageTypeNak && !x.req.GatewayIPAddr.IsUnspecified() && x.req.GatewayIPAddr != nil {
		r.SetBroadcast() // RFC 2131 4.3.2: a relayed NAK is broadcast by the relay
	}
	return r
}

// options adds the configuration options to an OFFER or ACK, and echoes
// option 82 on every answer (RFC 3046 2.2: the server copies it unchanged).
func (x *exchange) options() {
	r := x.resp
	if x.info != nil {
		r.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionRelayAgentInformation, x.info.Raw))
	}
	if r.MessageType() == dhcpv4.MessageTypeNak {
		return
	}
	n := x.n
	r.UpdateOption(dhcpv4.OptSubnetMask(n.mask))
	r.UpdateOption(dhcpv4.OptRouter(n.gateway))
	r.UpdateOption(dhcpv4.OptBroadcastAddress(n.bcast))
	if len(n.dns) > 0 {
		r.UpdateOption(dhcpv4.OptDNS(n.dns...))
	}
	if x.c.domain != "" {
		r.UpdateOption(dhcpv4.OptDomainName(x.c.domain))
	}
	if x.req.MessageType() == dhcpv4.MessageTypeInform {
		return // RFC 2131 3.4: no lease time in an answer to INFORM
	}
	lt := time.Duration(n.lease) * time.Second
	r.UpdateOption(dhcpv4.OptIPAddressLeaseTime(lt))
	r.UpdateOption(dhcpv4.OptRenewTimeValue(lt / 2))
	r.UpdateOption(dhcpv4.OptRebindingTimeValue(lt * 7 / 8))
	if h := x.hostname(); h != "" {
		r.UpdateOption(dhcpv4.OptHostName(h))
	}
}

// destination follows RFC 2131 4.1: to the relay when relayed; to the
// client's address when it has one; otherwise broadcast on the interface
// (the client has no address yet, and broadcasting avoids writing its MAC
// into the ARP table by hand).
func (x *exchange) destination() *net.UDPAddr {
	req := x.req
	if g := req.GatewayIPAddr; g != nil && !g.IsUnspecified() {
		return &net.UDPAddr{IP: g, Port: dhcpv4.ServerPort}
	}
	if x.resp.MessageType() != dhcpv4.MessageTypeNak && req.ClientIPAddr != nil && !req.ClientIPAddr.IsUnspecified() {
		return &net.UDPAddr{IP: req.ClientIPAddr, Port: dhcpv4.ClientPort}
	}
	return &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
}
