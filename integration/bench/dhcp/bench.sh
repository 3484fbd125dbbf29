#!/bin/sh
# DHCP benchmark: ISC Kea vs routerd's DHCP engine, side by side in one run,
# with perfdhcp on the kea-bench recipe's topology (tk-srv <-veth-> tk-cli,
# 10.99.0.1/16, 2001:db8:99::1/64), the same perfdhcp commands, rates,
# client counts and durations for both servers.
#
# For each test (v4 DORA, v6 SARR, v6 SARR with -e address-and-prefix) and
# each target rate, Kea and ours are run one after the other on a fresh
# topology. Two figures per server:
#
#   - the highest achieved rate whose drops (worst of the two exchange
#     kinds) stay under 1%;
#   - exchanges per CPU-second of the server process (user+system time read
#     from /proc during the perfdhcp run): how much DHCP one core buys.
#
# perfdhcp is single-threaded and shares the two cores with the server, so
# unconstrained runs measure the pair: the less CPU a server takes, the more
# is left for perfdhcp to drive it with (measured: Kea tops out near
# 14,000-17,000 exchanges/s, ours was driven to 19,000). QUOTA=N (percent
# of one core) runs each server under the same CFS CPU quota (cgroup v1 cpu
# controller, 2 ms period so a throttled server's socket buffer does not
# overflow), which makes the server the bottleneck and the rate table a
# comparison of the servers for the same CPU.
#
# Ours runs with leases made durable in etcd (embedded, fsync on) before each
# answer that changes a lease, lease caching at its default (a renewal within
# 25% of the lease time is answered from the durable lease, as ISC dhcpd does
# by default; Kea 2.2 as the recipe configures it writes every renewal to
# its memfile, without fsync), and with 100,000 MAC reservations loaded (on a
# second interface, vk-res, 10.100.0.0/15, since the /16 perfdhcp uses
# cannot hold them). Kea runs exactly as the recipe configures it.
#
# usage: bench.sh    env: RATES4, RATES6, RATES6PD (space-separated),
#        CLIENTS (10000), SECONDS_PER_RUN (10), QUOTA (percent, unset: none),
#        KEA_BENCH_DIR, RESERVATIONS
# Needs root, kea-dhcp4-server kea-dhcp6-server kea-admin (perfdhcp), iproute2, go.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
KEA=${KEA_BENCH_DIR:-$REPO/../shared/recipes/kea-bench}
[ -d "$KEA" ] || KEA=/work/shared/recipes/kea-bench
QUOTA=${QUOTA:-}
# Under a quota Kea's figure is low (about 4,000/s at half a core): start lower.
LOW=""; [ -n "$QUOTA" ] && LOW="2000 3000 "
RATES4=${RATES4:-"${LOW}4000 6000 8000 10000 12000 14000 16000 18000 20000"}
RATES6=${RATES6:-"${LOW}4000 6000 8000 10000 12000 14000 16000 18000 20000"}
RATES6PD=${RATES6PD:-"2000 3000 4000 6000 8000 10000 12000 14000 16000"}
CLIENTS=${CLIENTS:-10000}
SECS=${SECONDS_PER_RUN:-10}
RESERVATIONS=${RESERVATIONS:-100000}
CG=/sys/fs/cgroup/cpu/routerd-dhcpbench

[ "$(id -u)" = 0 ] || { echo "bench.sh: needs root (network namespaces)"; exit 1; }
for t in perfdhcp kea-dhcp4 kea-dhcp6 ip go; do
  command -v $t >/dev/null || { echo "bench.sh: $t not installed"; exit 1; }
done
if [ -n "$QUOTA" ]; then
  mkdir -p "$CG" 2>/dev/null && [ -w "$CG/cpu.cfs_quota_us" ] || { echo "bench.sh: QUOTA needs the cgroup v1 cpu controller at /sys/fs/cgroup/cpu"; exit 1; }
  echo 2000 > "$CG/cpu.cfs_period_us"
  echo $((QUOTA * 20)) > "$CG/cpu.cfs_quota_us"
fi

RUN=$(mktemp -d)
SPID=""
KPID=""
cleanup() {
  [ -n "$SPID" ] && kill "$SPID" 2>/dev/null
  [ -n "$KPID" ] && kill "$KPID" 2>/dev/null
  sleep 1
  "$KEA/netns-down.sh"
  [ -n "$QUOTA" ] && rmdir "$CG" 2>/dev/null
  rm -rf "$RUN"
}
trap cleanup EXIT INT TERM

echo "building dhcpbench-server..."
(cd "$REPO/services/dhcp" && go build -o "$RUN/dhcpbench-server" ./cmd/dhcpbench-server) || exit 1

up() {
  "$KEA/netns-down.sh"; "$KEA/netns-up.sh" || exit 1
  # Second served interface for the reservations, inside tk-srv only.
  ip -n tk-srv link add vk-res type veth peer name vk-resp
  ip -n tk-srv addr add 10.100.0.1/15 dev vk-res
  ip -n tk-srv -6 addr add 2001:db8:98::1/64 dev vk-res nodad
  ip -n tk-srv link set vk-res up; ip -n tk-srv link set vk-resp up
  sleep 2
}

# cpu PID: user+system clock ticks used so far by every thread of PID.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
confine() { [ -n "$QUOTA" ] && echo "$1" > "$CG/cgroup.procs"; true; }

# perf PID FAMILY RATE [extra]: run perfdhcp against the server PID, print
# "rate worst_drop_percent exchanges_per_cpu_second"
perf() {
  pid=$1; fam=$2; rate=$3; shift 3
  if [ "$fam" = 4 ]; then target=10.99.0.1; else target=all; fi
  c0=$(cpu "$pid")
  ip netns exec tk-cli timeout $((SECS + 30)) perfdhcp -$fam -g single -l vk-cli -r "$rate" -R "$CLIENTS" -p "$SECS" "$@" $target > "$RUN/perf.out" 2>&1
  c1=$(cpu "$pid")
  r=$(awk '/^Rate:/ {print $2; exit}' "$RUN/perf.out")
  d=$(awk '/drops ratio:/ {v=$3+0; if (v>m) m=v} END {print m+0}' "$RUN/perf.out")
  tck=$(getconf CLK_TCK)
  e=$(awk -v r="${r:-0}" -v s="$SECS" -v c=$((c1 - c0)) -v t="$tck" 'BEGIN { if (c > 0) printf "%.0f", r * s / (c / t); else print 0 }')
  echo "${r:-0} ${d:-100} $e"
}

kea_start() {
  fam=$1
  sed "s#@RUN@#$RUN#g" "$KEA/kea-dhcp$fam.json" > "$RUN/kea-dhcp$fam.json"
  rm -f "$RUN"/kea-leases*
  KEA_PIDFILE_DIR=$RUN KEA_LOCKFILE_DIR=$RUN ip netns exec tk-srv kea-dhcp$fam -c "$RUN/kea-dhcp$fam.json" > "$RUN/kea.stdout" 2>&1 &
  KPID=$!   # ip netns exec execs kea, so this is kea's pid
  confine "$KPID"
  sleep 2
}
kea_stop() { kill "$KPID" 2>/dev/null; wait "$KPID" 2>/dev/null; KPID=""; }

ours_start() {
  rm -rf "$RUN/etcd"
  "$RUN/dhcpbench-server" -netns /var/run/netns/tk-srv -iface vk-srv -res-iface vk-res \
    -reservations "$RESERVATIONS" -etcd-dir "$RUN/etcd" > "$RUN/ours.log" 2>&1 &
  SPID=$!
  i=0
  while [ $i -lt 120 ] && ! grep -q "reservations loaded" "$RUN/ours.log"; do sleep 0.5; i=$((i + 1)); done
  confine "$SPID"   # after loading: the quota is for serving
  sleep 2
}
ours_stop() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""; }

RESULTS=$RUN/results
: > "$RESULTS"
# bench NAME FAMILY RATES [extra perfdhcp args]
bench() {
  name=$1; fam=$2; rates=$3; shift 3
  for rate in $rates; do
    up; kea_start "$fam"; k=$(perf "$KPID" "$fam" "$rate" "$@"); kea_stop
    up; ours_start; o=$(perf "$SPID" "$fam" "$rate" "$@"); ours_stop
    echo "$name $rate kea $k ours $o" | tee -a "$RESULTS"
  done
}

bench v4-DORA 4 "$RATES4"
bench v6-SARR 6 "$RATES6"
bench v6-SARR+PD 6 "$RATES6PD" -e address-and-prefix

echo
echo "Per target rate (achieved/s, worst drop %, exchanges per server CPU-second):"
awk '{printf "  %-11s target %6d   kea %9.1f/s %6.3f%% %7d/cpu-s   ours %9.1f/s %6.3f%% %7d/cpu-s\n", $1, $2, $4, $5, $6, $8, $9, $10}' "$RESULTS"
echo
echo "Best achieved rate at <1% drops, and median exchanges per CPU-second (same perfdhcp runs, same topology${QUOTA:+, each server under a ${QUOTA}% CPU quota}):"
printf "  %-11s %10s %10s %7s   %10s %10s %7s\n" test kea ours ratio kea/cpu-s ours/cpu-s ratio
awk '
  function median(list,   n, a, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n ? a[int((n + 1) / 2)] : 0
  }
  {
    if ($5 < 1 && $4 > k[$1]) k[$1] = $4; if ($9 < 1 && $8 > o[$1]) o[$1] = $8; seen[$1] = NR
    ke[$1] = ke[$1] " " $6; oe[$1] = oe[$1] " " $10
  }
  END {
    for (t in seen) order[seen[t]] = t
    for (i = 1; i <= NR; i++) if (i in order) {
      t = order[i]; r = (k[t] > 0) ? sprintf("%.2fx", o[t] / k[t]) : "n/a"
      km = median(ke[t]); om = median(oe[t]); re = (km > 0) ? sprintf("%.2fx", om / km) : "n/a"
      printf "  %-11s %10.1f %10.1f %7s   %10d %10d %7s\n", t, k[t], o[t], r, km, om, re
    }
  }' "$RESULTS"
echo "(machine: $(nproc) cores, load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
