package snmp

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"routerd.dev/shared/netns"
)

// Link speeds come from the ethtool ioctl (ETHTOOL_GSET, which every
// kernel still answers from the driver's link settings): a netlink dump
// has none. The socket is made inside the namespace, so the names are
// looked up there.

// ethtoolCmd is struct ethtool_cmd.
type ethtoolCmd struct {
	Cmd           uint32
	Supported     uint32
	Advertising   uint32
	Speed         uint16
	Duplex        uint8
	Port          uint8
	PhyAddress    uint8
	Transceiver   uint8
	Autoneg       uint8
	MdioSupport   uint8
	Maxtxpkt      uint32
	Maxrxpkt      uint32
	SpeedHi       uint16
	EthTpMdix     uint8
	EthTpMdixCtrl uint8
	LpAdvertising uint32
	Reserved      [2]uint32
}

// ifreqData is struct ifreq with its ifr_data member.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [16]byte
}

const ethtoolGSET = 0x1

// speeds returns each named link's speed in Mb/s; links without one (lo,
// most virtual links, a port with no carrier) are left out.
func speeds(ns *netns.NS, names []string) map[string]uint64 {
	fd := -1
	open := func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		return err
	}
	var err error
	if ns != nil {
		err = ns.Do(open)
	} else {
		err = open()
	}
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	out := make(map[string]uint64, len(names))
	for _, n := range names {
		if len(n) >= unix.IFNAMSIZ {
			continue
		}
		cmd := ethtoolCmd{Cmd: ethtoolGSET}
		var ifr ifreqData
		copy(ifr.name[:], n)
		ifr.data = unsafe.Pointer(&cmd)
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
		runtime.KeepAlive(&cmd)
		if errno != 0 {
			continue
		}
		mbps := uint32(cmd.Speed) | uint32(cmd.SpeedHi)<<16
		if mbps == 0 || mbps == 0xffff || mbps == 0xffffffff { // SPEED_UNKNOWN
			continue
		}
		out[n] = uint64(mbps)
	}
	return out
}
