package shaper

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// groupProgram loads the download root's classifier: a four-instruction
// eBPF program (cls_bpf, not direct-action) that answers the class of the
// subscriber's group from the packet's priority, which the forward path's
// nftables map set to the subscriber's class G:m: it returns
// ShaperQdiscMajor:G, the root's class holding group G's HTB. A packet
// whose priority names no group (priority < 65536) gets the root's own
// handle: the kernel sends it unshaped. One program per interface,
// whatever the number of subscribers, and no tc filter per subscriber.
func groupProgram() (int, error) {
	const offPriority = 32 // offsetof(struct __sk_buff, priority)
	insns := []struct {
		op   uint8
		regs uint8 // dst in the low nibble, src in the high
		off  int16
		imm  int32
	}{
		{0x61, 0x1<<4 | 0x0, offPriority, 0},          // r0 = *(u32 *)(r1 + 32)
		{0x77, 0x0, 0, 16},                            // r0 >>= 16
		{0x47, 0x0, 0, kernel.ShaperQdiscMajor << 16}, // r0 |= major << 16
		{0x95, 0, 0, 0},                               // exit
	}
	buf := make([]byte, 8*len(insns))
	for i, in := range insns {
		b := buf[8*i:]
		b[0], b[1] = in.op, in.regs
		binary.LittleEndian.PutUint16(b[2:], uint16(in.off))
		binary.LittleEndian.PutUint32(b[4:], uint32(in.imm))
	}
	license := []byte("GPL\x00")
	logBuf := make([]byte, 4096)
	// union bpf_attr, BPF_PROG_LOAD's head.
	attr := struct {
		progType    uint32
		insnCnt     uint32
		insns       uint64
		license     uint64
		logLevel    uint32
		logSize     uint32
		logBuf      uint64
		kernVersion uint32
		progFlags   uint32
		progName    [16]byte
	}{
		progType: unix.BPF_PROG_TYPE_SCHED_CLS,
		insnCnt:  uint32(len(insns)),
		insns:    uint64(uintptr(unsafe.Pointer(&buf[0]))),
		license:  uint64(uintptr(unsafe.Pointer(&license[0]))),
		logLevel: 1,
		logSize:  uint32(len(logBuf)),
		logBuf:   uint64(uintptr(unsafe.Pointer(&logBuf[0]))),
	}
	copy(attr.progName[:], "routerd_shaper")
	fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_LOAD, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
	runtime.KeepAlive(buf)
	runtime.KeepAlive(license)
	runtime.KeepAlive(logBuf)
	if errno != 0 {
		return -1, fmt.Errorf("shaper: loading the group classifier (bpf): %v: %s", errno, cstr(logBuf))
	}
	return int(fd), nil
}

func cstr(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}
