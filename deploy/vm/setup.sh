#!/bin/sh
# Prepares the full-kernel VM tier (once per machine, as root): Debian's own
# kernel, which has the 802.1Q, 802.1ad (QinQ), bonding and dummy links this
# machine's kernel may lack, and an initramfs that boots it on the host's root
# file system (read-only 9p with a tmpfs overlay), so the VM runs the
# project's freshly built test binaries. Idempotent; everything goes under
# $VM_DIR (default .cache/vm in the repository). QEMU, busybox-static, kmod
# and cpio come from deploy/debian-packages.txt (make deps).
set -eu
D=$(cd "$(dirname "$0")" && pwd)
VM_DIR=${VM_DIR:-$D/../../.cache/vm}
mkdir -p "$VM_DIR"
VM_DIR=$(cd "$VM_DIR" && pwd)
if [ -f "$VM_DIR/initramfs.cpio.gz" ] && [ -f "$VM_DIR/kernel.version" ]; then
	exit 0
fi
cd "$VM_DIR"
# The kernel package linux-image-amd64 depends on now.
PKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$PKG" ]; then
	apt-get update -qq
	PKG=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
fi
[ -n "$PKG" ] || { echo "vm setup: cannot find the kernel package (apt-get update?)" >&2; exit 1; }
KV=${PKG#linux-image-}
rm -rf kernel ./*.deb
apt-get download "$PKG" >/dev/null
dpkg -x ./*.deb kernel
rm -f ./*.deb
depmod -b kernel "$KV"
R=$VM_DIR/initramfs
rm -rf "$R"; mkdir -p "$R/bin" "$R/lib/modules" "$R/proc" "$R/sys" "$R/dev"
cp /bin/busybox "$R/bin/busybox"
: > "$R/modules.order"
for m in virtio_pci virtio_net 9pnet_virtio 9p overlay; do
	for f in $(modprobe -d kernel -S "$KV" --show-depends $m | awk '$1=="insmod"{print $2}'); do
		b=$(basename "$f")
		grep -qx "$b" "$R/modules.order" || { cp "$f" "$R/lib/modules/"; echo "$b" >> "$R/modules.order"; }
	done
done
cp "$D/init" "$R/init"; chmod +x "$R/init"
(cd "$R" && find . | cpio -o -H newc --quiet | gzip -1) > initramfs.cpio.gz
echo "$KV" > kernel.version
echo "vm: kernel $KV ready in $VM_DIR"
