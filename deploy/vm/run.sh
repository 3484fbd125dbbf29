#!/bin/sh
# Boots the VM (QEMU, software emulation, no network beyond an isolated hub)
# on the host's root file system and runs one guest script (an absolute
# path), then powers off. The guest script prints VM-RESULT: OK when all it
# ran passed; run.sh exits 0 only then. Bounded by VM_TIMEOUT seconds.
set -eu
D=$(cd "$(dirname "$0")" && pwd)
VM_DIR=${VM_DIR:-$D/../../.cache/vm}
VM_DIR=$(cd "$VM_DIR" && pwd)
KV=$(cat "$VM_DIR/kernel.version")
out=$(mktemp)
trap 'rm -f "$out"' EXIT
timeout "${VM_TIMEOUT:-600}" qemu-system-x86_64 -accel tcg -nographic -no-reboot -m "${VM_MEM:-1536}" -smp "${VM_SMP:-2}" \
	-kernel "$VM_DIR/kernel/boot/vmlinuz-$KV" -initrd "$VM_DIR/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet panic=-1 vmcmd=$1 kmods=$VM_DIR/kernel/lib/modules" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-netdev hubport,id=n0,hubid=0 -device virtio-net-pci,netdev=n0 </dev/null | tee "$out" | tr -d '\r'
grep -q "VM-RESULT: OK" "$out"
