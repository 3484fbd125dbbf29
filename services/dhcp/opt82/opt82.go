// Package opt82 reads DHCP relay agent information (option 82, RFC 3046) as a
// Huawei OLT inserts it and maps it to a fibre service's fixed address.
//
// # Huawei circuit-id format parsed
//
// A Huawei MA56xx/MA58xx OLT acting as a layer-2 DHCP relay agent (giaddr
// left empty) inserts option 82 with the circuit-id (sub-option 1) in its
// TR-101 style "common" format:
//
//	<access-node-id> <type> <frame>/<slot>/<port>:<ont-id>[.<more>...]
//	e.g. "MA5800-POP17 xpon 0/1/0:5.1.116"   (frame 0, slot 1, port 0, ONT 5)
//
// where <type> is xpon, gpon, epon or eth, and everything after the ONT id
// (GEM port index, VLAN) is ignored. Some releases insert a rack number
// first ("0/0/1/0:5"); a four-part port is read as rack/frame/slot/port and
// the rack dropped. The format on a given OLT is set by its
// "dhcp option82 ... circuit-id format" command and can differ per site,
// which is why the lookup is an interface: an operator with another layout
// plugs in another Lookup.
//
// The remote-id (sub-option 2) is matched against the ONT serial number
// (16 hex digits, case-insensitive) when the circuit-id gives no match.
package opt82

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"routerd.dev/services/dhcp/config"
)

// Sub-option codes of RFC 3046.
const (
	CircuitID = 1
	RemoteID  = 2
)

// Info is the relay agent information of one request.
type Info struct {
	CircuitID []byte
	RemoteID  []byte
	// Raw is the whole option value, echoed back unchanged (RFC 3046 2.2).
	Raw []byte
}

// Parse splits an option 82 value into its sub-options. A malformed value
// (a sub-option running past the end) is an error: such a packet is dropped
// rather than answered with a half-read identity.
func Parse(raw []byte) (Info, error) {
	in := Info{Raw: raw}
	for i := 0; i < len(raw); {
		if i+2 > len(raw) {
			return Info{}, fmt.Errorf("option 82: truncated sub-option header at %d", i)
		}
		code, n := raw[i], int(raw[i+1])
		if i+2+n > len(raw) {
			return Info{}, fmt.Errorf("option 82: sub-option %d runs past the end", code)
		}
		v := raw[i+2 : i+2+n]
		switch code {
		case CircuitID:
			in.CircuitID = v
		case RemoteID:
			in.RemoteID = v
		}
		i += 2 + n
	}
	return in, nil
}

// Port is the PON location a Huawei circuit-id names.
type Port struct {
	AccessNode string
	Frame      int
	Slot       int
	Port       int
	ONTID      int
}

// PON is frame/slot/port as the spec writes it.
func (p Port) PON() string { return fmt.Sprintf("%d/%d/%d", p.Frame, p.Slot, p.Port) }

// ParseHuaweiCircuitID parses the format documented in the package comment.
func ParseHuaweiCircuitID(s string) (Port, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return Port{}, fmt.Errorf("circuit-id %q: want <access-node> [<type>] f/s/p:ont", s)
	}
	loc := f[len(f)-1]
	p := Port{AccessNode: f[0]}
	colon := strings.IndexByte(loc, ':')
	if colon < 0 {
		return Port{}, fmt.Errorf("circuit-id %q: no ':' before the ONT id", s)
	}
	parts := strings.Split(loc[:colon], "/")
	if len(parts) == 4 {
		parts = parts[1:]
	}
	if len(parts) != 3 {
		return Port{}, fmt.Errorf("circuit-id %q: want frame/slot/port", s)
	}
	nums := make([]int, 4)
	for i, x := range parts {
		n, err := strconv.Atoi(x)
		if err != nil || n < 0 || n > 255 {
			return Port{}, fmt.Errorf("circuit-id %q: bad number %q", s, x)
		}
		nums[i] = n
	}
	ont := loc[colon+1:]
	if dot := strings.IndexByte(ont, '.'); dot >= 0 {
		ont = ont[:dot]
	}
	n, err := strconv.Atoi(ont)
	if err != nil || n < 0 || n > 1023 {
		return Port{}, fmt.Errorf("circuit-id %q: bad ONT id %q", s, ont)
	}
	p.Frame, p.Slot, p.Port, p.ONTID = nums[0], nums[1], nums[2], n
	return p, nil
}

// Match is what a lookup found for one (circuit-id, remote-id).
type Match struct {
	// ServiceID names the service, e.g. "svc_0a1b2c3d".
	ServiceID string
	// IPv4 is the fixed address to hand out.
	IPv4     netip.Addr
	Hostname string
}

// Lookup maps relay agent information to a fixed address.
type Lookup interface {
	Lookup(circuitID, remoteID []byte) (Match, bool)
}

// ServiceLookup is the Lookup built from the configured fibre services with
// the Huawei circuit-id format.
type ServiceLookup struct {
	byPort map[string]Match // "<olt>|f/s/p|ont"; olt empty for any OLT
	bySN   map[string]Match
}

// NewServiceLookup indexes services.
func NewServiceLookup(services []config.Service) *ServiceLookup {
	l := &ServiceLookup{byPort: map[string]Match{}, bySN: map[string]Match{}}
	for _, s := range services {
		l.Put(s)
	}
	return l
}

// Put indexes one service (callers serialise Put, Delete and Lookup).
func (l *ServiceLookup) Put(s config.Service) {
	m := Match{ServiceID: s.ID, IPv4: s.IPv4, Hostname: s.Hostname}
	if m.Hostname == "" {
		m.Hostname = strings.ReplaceAll(s.ID, "_", "-")
	}
	l.byPort[portKey(s.OLT, s.PON, s.ONTID)] = m
	if s.SN != "" {
		l.bySN[strings.ToUpper(s.SN)] = m
	}
}

// Delete forgets one service, as it was Put.
func (l *ServiceLookup) Delete(s config.Service) {
	if m, ok := l.byPort[portKey(s.OLT, s.PON, s.ONTID)]; ok && m.ServiceID == s.ID {
		delete(l.byPort, portKey(s.OLT, s.PON, s.ONTID))
	}
	if m, ok := l.bySN[strings.ToUpper(s.SN)]; ok && s.SN != "" && m.ServiceID == s.ID {
		delete(l.bySN, strings.ToUpper(s.SN))
	}
}

func portKey(olt, pon string, ont int) string { return olt + "|" + pon + "|" + strconv.Itoa(ont) }

// Lookup implements Lookup: an exact OLT match first, then a service that
// accepts any OLT, then the remote-id as ONT serial.
func (l *ServiceLookup) Lookup(circuitID, remoteID []byte) (Match, bool) {
	if p, err := ParseHuaweiCircuitID(string(circuitID)); err == nil {
		if m, ok := l.byPort[portKey(p.AccessNode, p.PON(), p.ONTID)]; ok {
			return m, true
		}
		if m, ok := l.byPort[portKey("", p.PON(), p.ONTID)]; ok {
			return m, true
		}
	}
	if len(remoteID) > 0 {
		if m, ok := l.bySN[strings.ToUpper(string(remoteID))]; ok {
			return m, true
		}
	}
	return Match{}, false
}
