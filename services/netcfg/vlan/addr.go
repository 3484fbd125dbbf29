package vlan

import (
	"fmt"
	"net"
	"net/netip"
	"sort"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/services/netcfg/link"
	"routerd.dev/shared/apierr"
)

// correct parses a CIDR address for an interface. A network address (all
// host bits zero, where the prefix has host bits) is corrected to the
// first host: the spec's rule, so an operator who types the subnet gets
// the gateway address. note says what was changed, "" when nothing was.
func correct(field, s string) (p netip.Prefix, note string, err error) {
	p, perr := netip.ParsePrefix(s)
	if perr != nil {
		if _, aerr := netip.ParseAddr(s); aerr == nil {
			return p, "", apierr.Invalid(field, "%s %q needs a prefix length (address/len)", field, s)
		}
		return p, "", apierr.Invalid(field, "invalid %s %q: want address/prefix-length", field, s)
	}
	if p.Addr().Zone() != "" {
		return p, "", apierr.Invalid(field, "invalid %s %q", field, s)
	}
	p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits())
	bits := p.Addr().BitLen()
	if p.Bits() < bits-1 && p.Masked().Addr() == p.Addr() {
		first := p.Addr().Next()
		c := netip.PrefixFrom(first, p.Bits())
		return c, fmt.Sprintf("%s is the network address; assigned the first host %s", p, c), nil
	}
	if a := p.Addr(); a.IsMulticast() || a.IsUnspecified() || a.IsLoopback() {
		return p, "", apierr.Invalid(field, "%s %s cannot be an interface address", field, p)
	}
	return p, "", nil
}

// liveAddrs lists the global addresses of every link by link name: two
// dumps (links, then every address at once), however many links there are.
func liveAddrs(nl *netlink.Handle) (map[string][]netip.Prefix, error) {
	links, err := link.Links(nl)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	as, err := link.Addrs(nl, nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("listing addresses: %w", err)
	}
	out := map[string][]netip.Prefix{}
	for _, a := range as {
		if p, ok := prefixOf(a); ok {
			out[names[a.LinkIndex]] = append(out[names[a.LinkIndex]], p)
		}
	}
	return out, nil
}

// prefixOf is a kernel address as a prefix, false for the link-local and
// loopback addresses the kernel manages itself.
func prefixOf(a netlink.Addr) (netip.Prefix, bool) {
	if a.IPNet == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLoopback() {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	return netip.PrefixFrom(ip, ones), true
}

func toAddr(p netip.Prefix) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
}

// syncAddrs makes the global addresses of an interface netcfg owns exactly
// want: adds what is missing, removes what is not wanted. On a link netcfg
// did not create, only adds (owned=false): the operator's addresses there
// are theirs.
func (b *Book) syncAddrs(name string, want []netip.Prefix, owned bool) (added, removed []string, err error) {
	nl := b.nl
	l, err := nl.LinkByName(name)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", name, err)
	}
	as, err := link.Addrs(nl, l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, nil, fmt.Errorf("listing addresses of %s: %w", name, err)
	}
	var live []netip.Prefix
	for _, a := range as {
		if p, ok := prefixOf(a); ok {
			live = append(live, p)
		}
	}
	return b.syncKnown(l, live, want, owned)
}

// syncKnown is syncAddrs with the link's live addresses already listed
// (the reconcile lists every address once, not once per link). The
// address index learns each change at once.
func (b *Book) syncKnown(l netlink.Link, live, want []netip.Prefix, owned bool) (added, removed []string, err error) {
	nl, name := b.nl, l.Attrs().Name
	have := map[netip.Prefix]bool{}
	for _, p := range live {
		have[p] = true
	}
	wanted := map[netip.Prefix]bool{}
	for _, p := range want {
		wanted[p] = true
		if !have[p] {
			if err := nl.AddrAdd(l, toAddr(p)); err != nil && err != unix.EEXIST {
				return added, removed, fmt.Errorf("add %s to %s: %w", p, name, err)
			}
			b.idx.kernel(kernelChange{link: l.Attrs().Index, p: p, add: true})
			added = append(added, p.String())
		}
	}
	if owned {
		for p := range have {
			if !wanted[p] {
				if err := nl.AddrDel(l, toAddr(p)); err != nil {
					return added, removed, fmt.Errorf("remove %s from %s: %w", p, name, err)
				}
				b.idx.kernel(kernelChange{link: l.Attrs().Index, p: p})
				removed = append(removed, p.String())
			}
		}
	}
	sort.Strings(added)
	sort.Strings(removed)
	return added, removed, nil
}

func split(ps []netip.Prefix) (v4, v6 []string) {
	v4, v6 = []string{}, []string{}
	for _, p := range ps {
		if p.Addr().Is4() {
			v4 = append(v4, p.String())
		} else {
			v6 = append(v6, p.String())
		}
	}
	sort.Strings(v4)
	sort.Strings(v6)
	return v4, v6
}

func parseAll(ss ...[]string) []netip.Prefix {
	var out []netip.Prefix
	for _, list := range ss {
		for _, s := range list {
			if p, err := netip.ParsePrefix(s); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}
