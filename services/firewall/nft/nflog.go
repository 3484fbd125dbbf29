package nft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// The drops the anti-spoofing chains log (`log group G`, rate-limited in
// the kernel) arrive here through nfnetlink_log, in the target namespace:
// the service reads them into its log, never a file.

// nfnetlink_log's message types and attributes (linux/netfilter/nfnetlink_log.h).
const (
	nfulnlMsgPacket = 0
	nfulnlMsgConfig = 1

	nfulaCfgCmd  = 1
	nfulaCfgMode = 2

	nfulnlCfgCmdBind   = 1
	nfulnlCfgCmdUnbind = 2
	nfulnlCopyPacket   = 2

	nfulaPacketHdr    = 1
	nfulaTimestamp    = 3
	nfulaIfindexIndev = 4
	nfulaHwaddr       = 8
	nfulaPayload      = 9
	nfulaPrefix       = 10
)

// LogPacket is one logged packet.
type LogPacket struct {
	Time    time.Time
	Prefix  string
	IfIndex int
	MAC     net.HardwareAddr
	Proto   uint16 // ethertype
	Payload []byte // from the network header
}

// LogReader receives one nflog group in a namespace.
type LogReader struct {
	c     *netlink.Conn
	group uint16
}

// ListenLog binds group in ns.
func ListenLog(ns *netns.NS, group uint16) (*LogReader, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: ns.FD()})
	if err != nil {
		return nil, fmt.Errorf("nflog: %w", err)
	}
	r := &LogReader{c: c, group: group}
	// Unbind first: a group left bound by a previous term of this
	// process answers EBUSY to a second bind.
	_ = r.config(netlink.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdUnbind}})
	if err := r.config(netlink.Attribute{Type: nfulaCfgCmd, Data: []byte{nfulnlCfgCmdBind}}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: binding group %d: %w", group, err)
	}
	mode := make([]byte, 6)
	binary.BigEndian.PutUint32(mode, 256) // copy range: headers are enough
	mode[4] = nfulnlCopyPacket
	if err := r.config(netlink.Attribute{Type: nfulaCfgMode, Data: mode}); err != nil {
		c.Close()
		return nil, fmt.Errorf("nflog: copy mode: %w", err)
	}
	return r, nil
}

func (r *LogReader) config(a netlink.Attribute) error {
	attrs, err := netlink.MarshalAttributes([]netlink.Attribute{a})
	if err != nil {
		return err
	}
	hdr := []byte{unix.AF_UNSPEC, 0, 0, 0}
	binary.BigEndian.PutUint16(hdr[2:], r.group)
	_, err = r.c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8 | nfulnlMsgConfig), Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(hdr, attrs...),
	})
	return err
}

// Close stops the reader (Read returns an error).
func (r *LogReader) Close() error { return r.c.Close() }

// Read waits for the next packets.
func (r *LogReader) Read() ([]LogPacket, error) {
	msgs, err := r.c.Receive()
	if err != nil {
		return nil, err
	}
	var out []LogPacket
	for _, m := range msgs {
		if m.Header.Type != netlink.HeaderType(unix.NFNL_SUBSYS_ULOG<<8|nfulnlMsgPacket) || len(m.Data) < 4 {
			continue
		}
		p, err := parsePacket(m.Data[4:])
		if err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func parsePacket(b []byte) (LogPacket, error) {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return LogPacket{}, err
	}
	ad.ByteOrder = binary.BigEndian
	p := LogPacket{Time: time.Now()}
	for ad.Next() {
		d := ad.Bytes()
		switch ad.Type() {
		case nfulaPacketHdr:
			if len(d) >= 2 {
				p.Proto = binary.BigEndian.Uint16(d)
			}
		case nfulaTimestamp:
			if len(d) >= 16 {
				sec, usec := binary.BigEndian.Uint64(d), binary.BigEndian.Uint64(d[8:])
				p.Time = time.Unix(int64(sec), int64(usec)*1000)
			}
		case nfulaIfindexIndev:
			if len(d) >= 4 {
				p.IfIndex = int(binary.BigEndian.Uint32(d))
			}
		case nfulaHwaddr:
			if len(d) >= 4 {
				n := int(binary.BigEndian.Uint16(d))
				if n <= len(d)-4 {
					p.MAC = append(net.HardwareAddr(nil), d[4:4+n]...)
				}
			}
		case nfulaPayload:
			p.Payload = append([]byte(nil), d...)
		case nfulaPrefix:
			p.Prefix = string(trimNul(d))
		}
	}
	if err := ad.Err(); err != nil {
		return p, err
	}
	if p.Payload == nil {
		return p, errors.New("nflog: no payload")
	}
	return p, nil
}

func trimNul(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// Decoded is what the log keeps of a packet.
type Decoded struct {
	Kind  string // ip or arp
	Src   netip.Addr
	Dst   netip.Addr
	Proto string
	Dport int
	Op    string
}

// Decode reads the addresses of a logged packet.
func Decode(p LogPacket) (Decoded, bool) {
	b := p.Payload
	switch p.Proto {
	case 0x0806:
		if len(b) < 28 {
			return Decoded{}, false
		}
		d := Decoded{Kind: "arp", Op: "request"}
		if binary.BigEndian.Uint16(b[6:8]) == 2 {
			d.Op = "reply"
		}
		d.Src = netip.AddrFrom4([4]byte(b[14:18]))
		d.Dst = netip.AddrFrom4([4]byte(b[24:28]))
		return d, true
	case 0x0800:
		if len(b) < 20 {
			return Decoded{}, false
		}
		d := Decoded{Kind: "ip", Src: netip.AddrFrom4([4]byte(b[12:16])), Dst: netip.AddrFrom4([4]byte(b[16:20]))}
		ihl := int(b[0]&0x0f) * 4
		d.Proto, d.Dport = l4(b[9], b, ihl, false)
		return d, true
	case 0x86dd:
		if len(b) < 40 {
			return Decoded{}, false
		}
		d := Decoded{Kind: "ip", Src: netip.AddrFrom16([16]byte(b[8:24])), Dst: netip.AddrFrom16([16]byte(b[24:40]))}
		d.Proto, d.Dport = l4(b[6], b, 40, true)
		return d, true
	}
	return Decoded{}, false
}

func l4(proto byte, b []byte, off int, v6 bool) (string, int) {
	switch proto {
	case unix.IPPROTO_TCP, unix.IPPROTO_UDP:
		name := "TCP"
		if proto == unix.IPPROTO_UDP {
			name = "UDP"
		}
		if len(b) >= off+4 {
			return name, int(binary.BigEndian.Uint16(b[off+2:]))
		}
		return name, 0
	case unix.IPPROTO_ICMP:
		return "ICMP", 0
	case unix.IPPROTO_ICMPV6:
		if len(b) > off {
			switch b[off] {
			case 133:
				return "ICMPv6/RS", 0
			case 134:
				return "ICMPv6/RA", 0
			case 135:
				return "ICMPv6/NS", 0
			case 136:
				return "ICMPv6/NA", 0
			case 137:
				return "ICMPv6/Redirect", 0
			case 128:
				return "ICMPv6/echo-request", 0
			}
		}
		return "ICMPv6", 0
	}
	return fmt.Sprintf("proto %d", proto), 0
}
