package network

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/proto/kernel"
	"routerd.dev/services/netcfg/link"
)

// BondAlias marks the bonds netcfg creates from the network document
// (`routerd:netcfg network`); the VLAN links carry `routerd:netcfg` alone,
// so neither reconcile mistakes the other's links for its own.
const BondAlias = kernel.LinkAliasPrefix + "netcfg network"

// Kind is the spec's kind of a link: port, bond, vlan, ifb, bmc (the
// server's management USB link, not a router port), loopback or other.
func Kind(l netlink.Link, driver string) string {
	a := l.Attrs()
	if a.Flags&net.FlagLoopback != 0 || a.RawFlags&unix.IFF_LOOPBACK != 0 {
		return "loopback"
	}
	switch l.(type) {
	case *netlink.Vlan:
		return "vlan"
	case *netlink.Bond:
		return "bond"
	case *netlink.Ifb:
		return "ifb"
	case *netlink.Device, *netlink.Veth:
		switch driver {
		case "cdc_ether", "rndis_host", "cdc_ncm", "cdc_eem":
			return "bmc"
		}
		if strings.HasPrefix(a.Name, "usb") || strings.HasPrefix(a.Name, "enx") {
			return "bmc"
		}
		return "port"
	}
	return "other"
}

// LinkState is a link's state as Apply changes it, kept so that a
// rollback restores it exactly (also for ports the previous document did
// not manage).
type LinkState struct {
	Exists bool   `json:"exists"`
	MTU    int    `json:"mtu"`
	Up     bool   `json:"up"`
	Master string `json:"master"`
}

// Snapshot is the state of some links by name.
type Snapshot map[string]LinkState

// Snap records the state of the named links.
func Snap(nl *netlink.Handle, names []string) (Snapshot, error) {
	links, err := link.Links(nl)
	if err != nil {
		return nil, err
	}
	byIndex := map[int]string{}
	byName := map[string]netlink.Link{}
	for _, l := range links {
		byIndex[l.Attrs().Index] = l.Attrs().Name
		byName[l.Attrs().Name] = l
	}
	out := Snapshot{}
	for _, n := range names {
		l, ok := byName[n]
		if !ok {
			out[n] = LinkState{}
			continue
		}
		a := l.Attrs()
		out[n] = LinkState{Exists: true, MTU: a.MTU, Up: a.Flags&1 != 0, Master: byIndex[a.MasterIndex]}
	}
	return out, nil
}

// Apply brings the kernel to c: bonds netcfg made that c lacks (or that
// differ in mode or parameters) are deleted, their members released; the
// bonds of c are created and marked, their members enslaved; each port
// gets its MTU (null: 1500) and up state. Links c does not name are not
// touched. It returns what it changed, in `ip link` words.
func Apply(nl *netlink.Handle, c Config) ([]string, error) {
	c = Normal(c)
	var changes []string
	links, err := link.Links(nl)
	if err != nil {
		return nil, fmt.Errorf("listing links: %w", err)
	}
	want := map[string]int{}
	for i, b := range c.Bonds {
		want[b.Name] = i
	}
	masterOf := func(idx int) []netlink.Link {
		var out []netlink.Link
		for _, l := range links {
			if l.Attrs().MasterIndex == idx {
				out = append(out, l)
			}
		}
		return out
	}
	owned := map[int]bool{}
	for _, l := range links {
		b, ok := l.(*netlink.Bond)
		if !ok || l.Attrs().Alias != BondAlias {
			continue
		}
		i, ok := want[b.Name]
		why := "not configured"
		if ok {
			why = bondDiffers(b, c.Bonds[i])
		}
		if why == "" {
			owned[b.Index] = true
			continue
		}
		for _, m := range masterOf(b.Index) {
			if err := nl.LinkSetNoMaster(m); err != nil {
				return changes, fmt.Errorf("release %s from %s: %w", m.Attrs().Name, b.Name, err)
			}
			changes = append(changes, "link set "+m.Attrs().Name+" nomaster")
		}
		if err := nl.LinkDel(b); err != nil {
			return changes, fmt.Errorf("delete %s: %w", b.Name, err)
		}
		changes = append(changes, "link del "+b.Name+" ("+why+")")
	}
	for _, b := range c.Bonds {
		l, err := nl.LinkByName(b.Name)
		if err != nil {
			nb := netlink.NewLinkBond(netlink.LinkAttrs{Name: b.Name})
			nb.Mode = netlink.StringToBondMode(b.Mode)
			if v, ok := b.Params["lacp-rate"]; ok {
				nb.LacpRate = netlink.StringToBondLacpRate(fmt.Sprint(v))
			}
			if v, ok := b.Params["transmit-hash-policy"]; ok {
				nb.XmitHashPolicy = netlink.StringToBondXmitHashPolicy(fmt.Sprint(v))
			}
			if v, ok := b.Params["mii-monitor-interval"]; ok {
				nb.Miimon = intOf(v)
			}
			if err := nl.LinkAdd(nb); err != nil {
				if errors.Is(err, unix.EOPNOTSUPP) {
					return changes, fmt.Errorf("add bond %s: this kernel has no bonding support (module bonding): %w", b.Name, err)
				}
				return changes, fmt.Errorf("add bond %s: %w", b.Name, err)
			}
			if err := nl.LinkSetAlias(nb, BondAlias); err != nil {
				_ = nl.LinkDel(nb)
				return changes, fmt.Errorf("mark %s: %w", b.Name, err)
			}
			changes = append(changes, "link add "+b.Name+" type bond mode "+b.Mode)
			if l, err = nl.LinkByName(b.Name); err != nil {
				return changes, err
			}
		} else if l.Attrs().Alias != BondAlias {
			return changes, fmt.Errorf("%s exists and is not routerd's: not touched", b.Name)
		}
		for _, m := range b.Members {
			ml, err := nl.LinkByName(m)
			if err != nil {
				return changes, fmt.Errorf("member %s of %s: %w", m, b.Name, err)
			}
			if ml.Attrs().MasterIndex == l.Attrs().Index {
				continue
			}
			if ml.Attrs().MasterIndex != 0 {
				if err := nl.LinkSetNoMaster(ml); err != nil {
					return changes, fmt.Errorf("release %s: %w", m, err)
				}
			}
			if err := nl.LinkSetDown(ml); err != nil {
				return changes, fmt.Errorf("set %s down to enslave it: %w", m, err)
			}
			if err := nl.LinkSetMasterByIndex(ml, l.Attrs().Index); err != nil {
				return changes, fmt.Errorf("enslave %s to %s: %w", m, b.Name, err)
			}
			changes = append(changes, "link set "+m+" master "+b.Name)
		}
		// Members no longer listed are released.
		for _, ml := range masterOf(l.Attrs().Index) {
			if !contains(b.Members, ml.Attrs().Name) {
				if err := nl.LinkSetNoMaster(ml); err != nil {
					return changes, fmt.Errorf("release %s: %w", ml.Attrs().Name, err)
				}
				changes = append(changes, "link set "+ml.Attrs().Name+" nomaster")
			}
		}
		owned[l.Attrs().Index] = true
		if b.MTU != nil && l.Attrs().MTU != *b.MTU {
			if err := nl.LinkSetMTU(l, *b.MTU); err != nil {
				return changes, fmt.Errorf("set %s mtu %d: %w", b.Name, *b.MTU, err)
			}
			changes = append(changes, fmt.Sprintf("link set %s mtu %d", b.Name, *b.MTU))
		}
		if l.Attrs().Flags&1 == 0 {
			if err := nl.LinkSetUp(l); err != nil {
				return changes, fmt.Errorf("set %s up: %w", b.Name, err)
			}
			changes = append(changes, "link set "+b.Name+" up")
		}
	}
	members := Members(c)
	for _, p := range c.Ports {
		l, err := nl.LinkByName(p.Name)
		if err != nil {
			// A card gone: nothing to set; GET /network's drift says so.
			changes = append(changes, "port "+p.Name+" is missing from the kernel: skipped")
			continue
		}
		a := l.Attrs()
		if _, member := members[p.Name]; !member {
			if a.MasterIndex != 0 {
				if ml, err := nl.LinkByIndex(a.MasterIndex); err == nil && ml.Attrs().Alias == BondAlias {
					if err := nl.LinkSetNoMaster(l); err != nil {
						return changes, fmt.Errorf("release %s: %w", p.Name, err)
					}
					changes = append(changes, "link set "+p.Name+" nomaster")
				}
			}
			mtu := DefaultMTU
			if p.MTU != nil {
				mtu = *p.MTU
			}
			if a.MTU != mtu {
				if err := nl.LinkSetMTU(l, mtu); err != nil {
					return changes, fmt.Errorf("set %s mtu %d: %w", p.Name, mtu, err)
				}
				changes = append(changes, fmt.Sprintf("link set %s mtu %d", p.Name, mtu))
			}
		}
		if l, err = nl.LinkByName(p.Name); err != nil {
			return changes, err
		}
		if up := l.Attrs().Flags&1 != 0; up != p.Up {
			if p.Up {
				err = nl.LinkSetUp(l)
			} else {
				err = nl.LinkSetDown(l)
			}
			if err != nil {
				return changes, fmt.Errorf("set %s %s: %w", p.Name, map[bool]string{true: "up", false: "down"}[p.Up], err)
			}
			changes = append(changes, "link set "+p.Name+" "+map[bool]string{true: "up", false: "down"}[p.Up])
		}
	}
	return changes, nil
}

// Restore puts the links of snap back as recorded (MTU, up, master), after
// Apply brought back the previous document: ports the previous document
// did not manage get their own state back too.
func Restore(nl *netlink.Handle, snap Snapshot) error {
	var errs []error
	for name, st := range snap {
		if !st.Exists {
			continue
		}
		l, err := nl.LinkByName(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		a := l.Attrs()
		cur := ""
		if a.MasterIndex != 0 {
			if m, err := nl.LinkByIndex(a.MasterIndex); err == nil {
				cur = m.Attrs().Name
			}
		}
		if cur != st.Master {
			if cur != "" {
				if err := nl.LinkSetNoMaster(l); err != nil {
					errs = append(errs, err)
				}
			}
			if st.Master != "" {
				if m, err := nl.LinkByName(st.Master); err == nil {
					_ = nl.LinkSetDown(l)
					if err := nl.LinkSetMasterByIndex(l, m.Attrs().Index); err != nil {
						errs = append(errs, err)
					}
				}
			}
		}
		if st.Master == "" && a.MTU != st.MTU && st.MTU > 0 {
			if err := nl.LinkSetMTU(l, st.MTU); err != nil {
				errs = append(errs, fmt.Errorf("%s mtu: %w", name, err))
			}
		}
		l, _ = nl.LinkByName(name)
		if l != nil && (l.Attrs().Flags&1 != 0) != st.Up {
			if st.Up {
				err = nl.LinkSetUp(l)
			} else {
				err = nl.LinkSetDown(l)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("%s up=%v: %w", name, st.Up, err))
			}
		}
	}
	return errors.Join(errs...)
}

// bondDiffers says why a live bond is not the configured one ("" when it
// is): mode and parameters are set when a bond is made, so a difference
// recreates it.
func bondDiffers(l *netlink.Bond, b api.NetBond) string {
	if want := netlink.StringToBondMode(b.Mode); l.Mode != want {
		return fmt.Sprintf("mode %s, want %s", l.Mode, b.Mode)
	}
	lacp := "slow"
	if v, ok := b.Params["lacp-rate"]; ok {
		lacp = fmt.Sprint(v)
	}
	if b.Mode == "802.3ad" && l.LacpRate != netlink.StringToBondLacpRate(lacp) {
		return fmt.Sprintf("lacp-rate %s, want %s", l.LacpRate, lacp)
	}
	hash := "layer2"
	if v, ok := b.Params["transmit-hash-policy"]; ok {
		hash = fmt.Sprint(v)
	}
	if l.XmitHashPolicy != netlink.StringToBondXmitHashPolicy(hash) {
		return fmt.Sprintf("transmit-hash-policy %s, want %s", l.XmitHashPolicy, hash)
	}
	if v, ok := b.Params["mii-monitor-interval"]; ok && l.Miimon != intOf(v) {
		return fmt.Sprintf("mii-monitor-interval %d, want %d", l.Miimon, intOf(v))
	}
	return ""
}

func intOf(v any) int {
	switch x := v.(type) {
	case int:
		return x
	case float64:
		return int(x)
	}
	var n int
	fmt.Sscan(fmt.Sprint(v), &n)
	return n
}

// Ethtool asks the driver and speed of links through an ioctl socket
// opened in the target namespace.
type Ethtool struct{ FD int }

// Driver is the link's driver name ("" when it does not say).
func (e Ethtool) Driver(name string) string {
	if e.FD <= 0 {
		return ""
	}
	info, err := unix.IoctlGetEthtoolDrvinfo(e.FD, name)
	if err != nil {
		return ""
	}
	return unix.ByteSliceToString(info.Driver[:])
}

// Speed is the link speed in Mbit/s (nil when the driver does not know).
func (e Ethtool) Speed(name string) *int {
	if e.FD <= 0 || len(name) >= unix.IFNAMSIZ {
		return nil
	}
	cmd := new([44]byte)
	*(*uint32)(unsafe.Pointer(&cmd[0])) = 0x1 // ETHTOOL_GSET
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&cmd[0]))
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(e.FD), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return nil
	}
	runtime.KeepAlive(cmd)
	speed := uint32(*(*uint16)(unsafe.Pointer(&cmd[12]))) | uint32(*(*uint16)(unsafe.Pointer(&cmd[28])))<<16
	if speed == 0 || speed == 0xffff || speed == 0xffffffff {
		return nil
	}
	s := int(speed)
	return &s
}
