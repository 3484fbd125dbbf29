package network

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// SSHPort is the port an SSH server listens on.
const SSHPort = 22

// Session is an established TCP session to the router.
type Session struct {
	Local  netip.Addr
	Remote netip.AddrPort
}

// SSHSessions reads the kernel's socket table of nl's namespace (netlink
// sock_diag) for established TCP sessions whose local port is one of
// ports (SSHPort when none is given).
func SSHSessions(nl *netlink.Handle, ports ...int) ([]Session, error) {
	if len(ports) == 0 {
		ports = []int{SSHPort}
	}
	var out []Session
	for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
		socks, err := nl.SocketDiagTCP(fam)
		if err != nil {
			return nil, fmt.Errorf("reading the socket table: %w", err)
		}
		for _, s := range socks {
			if s.State != 1 { // TCP_ESTABLISHED
				continue
			}
			match := false
			for _, p := range ports {
				if int(s.ID.SourcePort) == p {
					match = true
				}
			}
			if !match {
				continue
			}
			l, ok1 := netip.AddrFromSlice(s.ID.Source)
			r, ok2 := netip.AddrFromSlice(s.ID.Destination)
			if !ok1 || !ok2 {
				continue
			}
			out = append(out, Session{Local: l.Unmap(), Remote: netip.AddrPortFrom(r.Unmap(), s.ID.DestinationPort)})
		}
	}
	return out, nil
}

// Guard is what a change must never take away: the local addresses of the
// SSH sessions, the API's listen address, and the address the caller says
// it came to.
type Guard struct {
	SSH    []Session
	API    netip.Addr // invalid or unspecified: none
	Caller netip.Addr // `local`: invalid when not sent
}

// Refusals names each address of gone (interface to the addresses that go
// with it, as CIDR) the guard protects, as `refused: ...` reasons.
func (g Guard) Refusals(gone map[string][]string, what func(iface string) string) []string {
	var out []string
	for _, iface := range sortedKeys(gone) {
		for _, c := range gone[iface] {
			p, err := netip.ParsePrefix(c)
			if err != nil {
				continue
			}
			a := p.Addr().Unmap()
			for _, s := range g.SSH {
				if s.Local == a {
					out = append(out, fmt.Sprintf("refused: %s would take %s away from %s, the address of the SSH session from %s", what(iface), a, iface, s.Remote))
					break
				}
			}
			if g.API.IsValid() && !g.API.IsUnspecified() && g.API.Unmap() == a {
				out = append(out, fmt.Sprintf("refused: %s would take %s away from %s, the address the API listens on", what(iface), a, iface))
			}
			if g.Caller.IsValid() && g.Caller.Unmap() == a {
				out = append(out, fmt.Sprintf("refused: %s would take %s away from %s, the address you are connected to (local)", what(iface), a, iface))
			}
		}
	}
	return out
}

// Protected says why removing address a would cut someone off ("" when
// it would not).
func (g Guard) Protected(a netip.Addr) string {
	a = a.Unmap()
	for _, s := range g.SSH {
		if s.Local == a {
			return fmt.Sprintf("%s is the address of the SSH session from %s", a, s.Remote)
		}
	}
	if g.API.IsValid() && !g.API.IsUnspecified() && g.API.Unmap() == a {
		return fmt.Sprintf("%s is the address the API listens on", a)
	}
	if g.Caller.IsValid() && g.Caller.Unmap() == a {
		return fmt.Sprintf("%s is the address you are connected to (local)", a)
	}
	return ""
}
