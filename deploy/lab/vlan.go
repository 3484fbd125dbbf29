package lab

import (
	"github.com/vishvananda/netlink"

	"routerd.dev/shared/netns"
)

// VLANs reports whether the kernel can make 802.1Q links in the lab's
// router namespace: it creates a VLAN on the uplink port and removes it at
// once. Where it cannot, the lab still runs, VLAN operations answer the
// kernel's refusal, and `make run-vm` runs the lab on a full kernel.
func (t Topology) VLANs() bool {
	ns, err := netns.Open(t.RouterPath())
	if err != nil {
		return false
	}
	defer ns.Close()
	nl, err := ns.Netlink()
	if err != nil {
		return false
	}
	defer nl.Close()
	parent, err := nl.LinkByName("up0")
	if err != nil {
		return false
	}
	probe := &netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "vlanprobe", ParentIndex: parent.Attrs().Index}, VlanId: 4094}
	if err := nl.LinkAdd(probe); err != nil {
		return false
	}
	_ = nl.LinkDel(probe)
	return true
}
