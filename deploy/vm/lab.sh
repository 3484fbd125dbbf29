#!/bin/sh
# `make run-vm`: the lab (routerd --lab) inside the VM, on Debian's full
# kernel (802.1Q, QinQ, bonds), with the API forwarded to 127.0.0.1:8880 on
# this machine. The VM's only network is QEMU's user-mode stack restricted
# to that forward: the guest reaches nothing outside. The lab's state lives
# in the VM's memory and is gone when it stops (Ctrl-A X quits QEMU).
set -eu
D=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$D/../.." && pwd)
"$D/setup.sh"
VM_DIR=${VM_DIR:-$ROOT/.cache/vm}
KV=$(cat "$VM_DIR/kernel.version")
PORT=${PORT:-8880}
guest=$(mktemp /tmp/routerd-vmlab.XXXXXX)
trap 'rm -f "$guest"' EXIT
cat > "$guest" <<GUEST
#!/bin/sh
modprobe 8021q; modprobe bonding max_bonds=0; modprobe dummy; modprobe veth
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ip link set lo up; ip link set eth0 up; ip addr add 10.0.2.15/24 dev eth0
mkdir -p /run/netns
echo "In this VM: the API is forwarded to http://127.0.0.1:$PORT on the host."
exec $ROOT/bin/routerd --lab --state /tmp/lab --listen 0.0.0.0:8880
GUEST
chmod +x "$guest"
exec qemu-system-x86_64 -accel tcg -nographic -no-reboot -m "${VM_MEM:-2048}" -smp "${VM_SMP:-2}" \
	-kernel "$VM_DIR/kernel/boot/vmlinuz-$KV" -initrd "$VM_DIR/initramfs.cpio.gz" \
	-append "console=ttyS0 quiet panic=-1 vmcmd=$guest kmods=$VM_DIR/kernel/lib/modules" \
	-virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
	-netdev "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:$PORT-:8880" -device virtio-net-pci,netdev=n0
