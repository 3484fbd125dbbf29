#!/bin/sh
# The VM tier of `make test`: builds the test binaries of the given packages
# on the host and runs, inside a VM with Debian's full kernel (deploy/vm),
# their tests named TestFullKernel* (VLAN, QinQ and bond links this
# machine's kernel may lack). Exits non-zero when any fails.
#   deploy/vm/gotest.sh ./services/netcfg/link/ [more packages]
# VM_RUN narrows the tests (a -test.run pattern); VM_ENV passes NAME=value
# pairs into the guest.
set -eu
D=$(cd "$(dirname "$0")" && pwd)
"$D/setup.sh"
work=$(mktemp -d /tmp/routerd-vm.XXXXXX)
trap 'rm -rf "$work"' EXIT
guest=$work/guest.sh
{
	echo '#!/bin/sh'
	echo 'modprobe 8021q; modprobe bonding max_bonds=0; modprobe dummy; modprobe veth'
	echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	echo 'fail=0'
	[ -n "${ROUTERD_BIN:-}" ] && echo "export ROUTERD_BIN=$ROUTERD_BIN"
	for kv in ${VM_ENV:-}; do echo "export $kv"; done
	echo 'mkdir -p /run/netns; ip link set lo up'
} > "$guest"
i=0
for pkg in "$@"; do
	i=$((i + 1))
	bin=$work/t$i.test
	go test -c -o "$bin" "$pkg"
	[ -f "$bin" ] || continue # no tests
	echo "echo '=== VM: $pkg'; (cd $(cd "$pkg" && pwd) && $bin -test.run '${VM_RUN:-^TestFullKernel}' -test.v -test.timeout ${VM_TEST_TIMEOUT:-300s}) || fail=1" >> "$guest"
done
echo '[ $fail = 0 ] && echo "VM-RESULT: OK" || echo "VM-RESULT: FAIL"' >> "$guest"
chmod +x "$guest"
"$D/run.sh" "$guest"
