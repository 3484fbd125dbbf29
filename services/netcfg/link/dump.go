package link

import (
	"errors"

	"github.com/vishvananda/netlink"
)

// dumpTries bounds how often a dump the kernel interrupted is asked again.
const dumpTries = 10

// Dump runs a netlink dump again while the kernel says it was interrupted
// by a concurrent change (NLM_F_DUMP_INTR, netlink.ErrDumpInterrupted):
// such a result may miss or repeat entries, and a reconcile must never act
// on a listing that misses one of its own links or addresses.
func Dump[T any](list func() (T, error)) (T, error) {
	var v T
	var err error
	for i := 0; i < dumpTries; i++ {
		if v, err = list(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, err
}

// Links lists the links of nl's namespace, consistently.
func Links(nl *netlink.Handle) ([]netlink.Link, error) {
	return Dump(nl.LinkList)
}

// Addrs lists the addresses of one link, consistently.
func Addrs(nl *netlink.Handle, l netlink.Link, family int) ([]netlink.Addr, error) {
	return Dump(func() ([]netlink.Addr, error) { return nl.AddrList(l, family) })
}
