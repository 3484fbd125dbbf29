package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/services/dhcp/config"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

// Served networks on the API: GET /networks, GET /interfaces, POST and
// DELETE /net, POST /dhcp/reload. Each change reads the stored
// configuration, changes it, has the running engine apply it (the test:
// Reconfigure validates the whole configuration and refuses it, leaving
// the one in force), and only then stores it, conditional on the stored
// revision it read. A refusal, or a store that fails after the engine
// took the change, leaves the previous configuration in force and in the
// store, and the answer is a 500 with `detail` whose message ends with
// "rolled back".

// ifAddrs is one interface's live addresses in the target namespace.
type ifAddrs struct {
	name string
	v4   netip.Prefix // the first IPv4 address with its prefix length
	v6   netip.Prefix // the first global IPv6 address
}

// liveAddrs reads the interfaces and their addresses of the namespace the
// engine serves. (netcfg owns addresses; reading them needs no bus round
// trip, the engine serves from the same namespace.) A listing the kernel
// interrupted with a concurrent change (a VLAN being made, its IPv6
// addresses settling) is read again.
func (s *Service) liveAddrs() ([]ifAddrs, error) {
	var out []ifAddrs
	var err error
	for try := 0; try < 10; try++ {
		if out, err = s.liveAddrsOnce(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	return out, err
}

func (s *Service) liveAddrsOnce() ([]ifAddrs, error) {
	h, err := s.d.NS.Netlink()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	// One dump of every address (AddrList of one link dumps them all and
	// filters: a dump per link made this quadratic in the VLANs).
	all, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	byLink := map[int][]netlink.Addr{}
	for _, a := range all {
		byLink[a.LinkIndex] = append(byLink[a.LinkIndex], a)
	}
	var out []ifAddrs
	for _, l := range links {
		if l.Attrs().Flags&net.FlagLoopback != 0 {
			continue
		}
		ia := ifAddrs{name: l.Attrs().Name}
		for _, a := range byLink[l.Attrs().Index] {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok {
				continue
			}
			ones, _ := a.Mask.Size()
			ip = ip.Unmap()
			switch {
			case ip.Is4() && !ia.v4.IsValid():
				ia.v4 = netip.PrefixFrom(ip, ones)
			case ip.Is6() && a.Scope == unix.RT_SCOPE_UNIVERSE && !ia.v6.IsValid():
				ia.v6 = netip.PrefixFrom(ip, ones)
			}
		}
		if ia.v4.IsValid() || ia.v6.IsValid() {
			out = append(out, ia)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

func (s *Service) liveAddr(iface string) (ifAddrs, error) {
	all, err := s.liveAddrs()
	if err != nil {
		return ifAddrs{}, apierr.Internal(err.Error(), "cannot read the interfaces' addresses")
	}
	for _, a := range all {
		if a.name == iface {
			return a, nil
		}
	}
	return ifAddrs{name: iface}, nil
}

func (s *Service) listNetworks(ctx context.Context, _ *api.None) (*api.NetworkList, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	c := eng.Config()
	out := &api.NetworkList{Networks: []api.ServedNetwork{}}
	for _, n := range c.Networks {
		sn := api.ServedNetwork{Iface: n.Iface, Gateway: n.Gateway.String(), Subnet: n.Prefix.Addr().String(),
			Mask: net.IP(net.CIDRMask(n.Prefix.Bits(), 32)).String(), CIDR: n.Prefix.Bits(), Network: n.Prefix.String(),
			Bcast: config.LastAddr(n.Prefix).String(), Label: n.Label}
		for _, n6 := range c.Networks6 {
			if n6.Iface == n.Iface {
				sn.IPv6, sn.Gateway6 = n6.Prefix.String(), n6.Gateway.String()
			}
		}
		out.Networks = append(out.Networks, sn)
	}
	out.Count = len(out.Networks)
	return out, nil
}

func (s *Service) listInterfaces(ctx context.Context, _ *api.None) (*api.InterfaceList, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	live, err := s.liveAddrs()
	if err != nil {
		return nil, apierr.Internal(err.Error(), "cannot read the interfaces' addresses")
	}
	c := eng.Config()
	out := &api.InterfaceList{Interfaces: []api.DHCPInterface{}}
	for _, a := range live {
		d := api.DHCPInterface{Iface: a.name}
		// A suspended interface (a disabled VLAN) keeps its subnets in the
		// configuration but is out of the listen list.
		_, off := c.Suspended[a.name]
		if a.v4.IsValid() {
			d.Gateway, d.Network, d.CIDR = a.v4.Addr().String(), a.v4.Masked().String(), a.v4.Bits()
			for _, n := range c.Networks {
				d.InDHCPConf = d.InDHCPConf || n.Prefix == a.v4.Masked()
				d.InDHCPListen = d.InDHCPListen || n.Iface == a.name && !off
				d.DHCPActive = d.DHCPActive || n.Iface == a.name && n.Prefix == a.v4.Masked() && !off
			}
		}
		if a.v6.IsValid() {
			d.Network6, d.Gateway6 = a.v6.Masked().String(), a.v6.Addr().String()
			for _, n := range c.Networks6 {
				d.InDHCP6Conf = d.InDHCP6Conf || n.Prefix == a.v6.Masked()
				d.InDHCP6List = d.InDHCP6List || n.Iface == a.name && !off
				d.DHCP6Active = d.DHCP6Active || n.Iface == a.name && n.Prefix == a.v6.Masked() && !off
			}
		}
		if off {
			d.Suspended = wireSuspension(c.Suspended[a.name])
		}
		out.Interfaces = append(out.Interfaces, d)
	}
	out.Count = len(out.Interfaces)
	return out, nil
}

func (s *Service) addNet(ctx context.Context, in *api.NetIface) (*api.NetAnswer, error) {
	a, err := s.liveAddr(in.Iface)
	if err != nil {
		return nil, err
	}
	if !a.v4.IsValid() {
		return nil, apierr.NotFound("%s has no IPv4 address", in.Iface).With("field", "iface")
	}
	n := config.Network{Iface: in.Iface, Gateway: a.v4.Addr(), Prefix: a.v4.Masked(), Label: in.Label}
	msg := fmt.Sprintf("Serving %s on %s", n.Prefix, in.Iface)
	err = s.changeConfig(ctx, func(c *config.Config) error {
		for i, old := range c.Networks {
			if old.Iface == in.Iface {
				// Served already: the live address wins, the pool and lease
				// time stay when they still fit.
				if old.Prefix == n.Prefix {
					n.PoolStart, n.PoolEnd, n.LeaseTime = old.PoolStart, old.PoolEnd, old.LeaseTime
				}
				if in.Label == "" {
					n.Label = old.Label
				}
				c.Networks[i] = n
				msg = fmt.Sprintf("%s on %s already served; updated", n.Prefix, in.Iface)
				return nil
			}
		}
		c.Networks = append(c.Networks, n)
		return nil
	})
	if err != nil {
		return nil, err
	}
	label := n.Label
	return &api.NetAnswer{Result: api.Result{Message: msg},
		Network: api.NetBlock{Iface: in.Iface, Gateway: n.Gateway.String(), Network: n.Prefix.String(), CIDR: n.Prefix.Bits()},
		Label:   &label}, nil
}

func (s *Service) deleteNet(ctx context.Context, in *api.NetIface) (*api.NetAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	var removed config.Network
	err = s.changeConfig(ctx, func(c *config.Config) error {
		for i, n := range c.Networks {
			if n.Iface != in.Iface {
				continue
			}
			if k := max(eng.reservedIn(n.Prefix), s.registeredIn(ctx, n.Prefix)); k > 0 {
				return apierr.Conflict("cannot remove, %d clients registered on the interface, delete them first", k).
					With("clients", k)
			}
			removed = n
			c.Networks = append(c.Networks[:i:i], c.Networks[i+1:]...)
			unserved(c, in.Iface)
			return nil
		}
		a, err := s.liveAddr(in.Iface)
		if err != nil {
			return err
		}
		if !a.v4.IsValid() {
			return apierr.NotFound("%s has no IPv4 address", in.Iface).With("field", "iface")
		}
		return apierr.Internal("", "no subnet block for %s (%s) in the DHCP configuration", in.Iface, a.v4.Masked())
	})
	if err != nil {
		return nil, err
	}
	return &api.NetAnswer{Result: api.Result{Message: fmt.Sprintf("%s on %s no longer served", removed.Prefix, in.Iface)},
		Network: api.NetBlock{Iface: in.Iface, Network: removed.Prefix.String()}}, nil
}

func (s *Service) reload(ctx context.Context, _ *api.None) (*api.ReloadAnswer, error) {
	eng, err := s.engine()
	if err != nil {
		return nil, err
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	cfg, rev, err := s.readConfig(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.loadReservations(ctx, eng); err != nil {
		return nil, apierr.Internal(err.Error(), "DHCP reload failed: reservations cannot be read")
	}
	if err := eng.Reconfigure(cfg); err != nil {
		s.refuse(rev, err)
		return nil, apierr.Internal(err.Error(), "DHCP reload failed: the stored configuration is refused; the previous one stays in force")
	}
	if rev != 0 {
		s.setState(ConfigState{Revision: rev, Source: "stored"})
		s.saveApplied(ctx, rev, cfg)
	}
	return &api.ReloadAnswer{Result: api.Result{Message: "DHCP configuration reloaded"}}, nil
}

// readConfig reads the stored configuration and its revision (0 when none
// is stored: the empty configuration).
func (s *Service) readConfig(ctx context.Context) (config.Config, int64, error) {
	resp, err := s.d.KV.Get(ctx, s.st.Key(ConfigDoc))
	if err != nil {
		return config.Config{}, 0, apierr.Unavailable("the store cannot be read: %v", err)
	}
	if len(resp.Kvs) == 0 {
		return config.Config{}, 0, nil
	}
	c, err := decodeConfig(resp.Kvs[0].Value)
	if err != nil {
		return config.Config{}, 0, apierr.Broken([]string{s.st.Key(ConfigDoc)}).With("detail", err.Error())
	}
	return c, resp.Kvs[0].ModRevision, nil
}

// changeConfig is one change of the served configuration: fn edits a copy
// of the stored one (an *apierr.Error from fn is answered as it is), the
// engine applies the result, then it is stored. On a refusal or a failed
// store, the previous configuration stays in force and stored.
func (s *Service) changeConfig(ctx context.Context, fn func(*config.Config) error) error {
	eng, err := s.engine()
	if err != nil {
		return err
	}
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	old, rev, err := s.readConfig(ctx)
	if err != nil {
		return err
	}
	next, _, _ := s.readConfig(ctx) // a deep copy to edit
	if err := fn(&next); err != nil {
		return err
	}
	if err := eng.Reconfigure(next); err != nil {
		return apierr.Internal(err.Error(), "the DHCP server refused the configuration; rolled back")
	}
	txn := s.wst.Txn().Put(s.st.Key(ConfigDoc), next)
	if rev == 0 {
		txn = txn.IfAbsent(s.st.Key(ConfigDoc))
	} else {
		txn = txn.IfRevision(s.st.Key(ConfigDoc), rev)
	}
	newRev, err := txn.Commit(ctx)
	if err != nil {
		detail := err.Error()
		if rerr := eng.Reconfigure(old); rerr != nil {
			detail += "; restoring the previous configuration: " + rerr.Error()
		}
		if errors.Is(err, store.ErrConflict) {
			return apierr.Conflict("the DHCP configuration changed meanwhile; rolled back").With("detail", detail)
		}
		return apierr.Internal(detail, "the DHCP configuration cannot be stored; rolled back")
	}
	s.setState(ConfigState{Revision: newRev, Source: "stored"})
	s.saveApplied(ctx, newRev, next)
	return nil
}

// registeredIn asks the subscribers service how many clients it has in p
// (its clients.summary per network); 0 when it does not answer or does
// not count per network yet. The reservations the engine holds are the
// other source: subscribers writes them through the reservations
// operations.
func (s *Service) registeredIn(ctx context.Context, p netip.Prefix) int {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	sum, err := bus.Invoke(ctx, s.d.NC, api.ClientsSummary, &api.None{})
	if err != nil {
		return 0
	}
	return int(sum.PerNetwork[p.String()])
}
