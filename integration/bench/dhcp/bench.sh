#!/bin/sh
# DHCP benchmark: ISC Kea vs routerd's DHCP engine, side by side in one run,
# with perfdhcp on the kea-bench recipe's topology (tk-srv <-veth-> tk-cli,
# 10.99.0.1/16, 2001:db8:99::1/64), the same perfdhcp commands, rates,
# client counts and durations for both servers.
#
# For each test (v4 DORA, v6 SARR, v6 SARR with -e address-and-prefix) and
# each target rate, Kea and ours are run one after the other on a fresh
# topology; the table reports, per server, the highest achieved rate whose
# drops (worst of the two exchange kinds) stay under 1%, and the ratio.
#
# Ours runs with leases made durable in etcd (embedded, fsync on) before each
# answer, and with 100,000 MAC reservations loaded (on a second interface,
# vk-res, 10.100.0.0/15, since the /16 perfdhcp uses cannot hold them).
# Kea runs exactly as the recipe configures it (memfile, persist, single
# threaded).
#
# usage: bench.sh [-q]    env: RATES4, RATES6, RATES6PD (space-separated),
#        CLIENTS (10000), SECONDS_PER_RUN (10), KEA_BENCH_DIR, RESERVATIONS
# Needs root, kea-dhcp4-server kea-dhcp6-server kea-admin (perfdhcp), iproute2, go.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
KEA=${KEA_BENCH_DIR:-$REPO/../shared/recipes/kea-bench}
[ -d "$KEA" ] || KEA=/work/shared/recipes/kea-bench
RATES4=${RATES4:-"6000 8000 9000 10000"}
RATES6=${RATES6:-"8000 10000 12000"}
RATES6PD=${RATES6PD:-"3000 4000 5000 6000"}
CLIENTS=${CLIENTS:-10000}
SECS=${SECONDS_PER_RUN:-10}
RESERVATIONS=${RESERVATIONS:-100000}

[ "$(id -u)" = 0 ] || { echo "bench.sh: needs root (network namespaces)"; exit 1; }
for t in perfdhcp kea-dhcp4 kea-dhcp6 ip go; do
  command -v $t >/dev/null || { echo "bench.sh: $t not installed"; exit 1; }
done

RUN=$(mktemp -d)
SPID=""
cleanup() {
  [ -n "$SPID" ] && kill "$SPID" 2>/dev/null
  [ -n "${KPID:-}" ] && kill "$KPID" 2>/dev/null
  sleep 1
  "$KEA/netns-down.sh"
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

# perf FAMILY RATE [extra]: run perfdhcp, print "rate worst_drop_percent"
perf() {
  fam=$1; rate=$2; shift 2
  if [ "$fam" = 4 ]; then target=10.99.0.1; else target=all; fi
  ip netns exec tk-cli timeout $((SECS + 30)) perfdhcp -$fam -g single -l vk-cli -r "$rate" -R "$CLIENTS" -p "$SECS" "$@" $target > "$RUN/perf.out" 2>&1
  r=$(awk '/^Rate:/ {print $2; exit}' "$RUN/perf.out")
  d=$(awk '/drops ratio:/ {v=$3+0; if (v>m) m=v} END {print m+0}' "$RUN/perf.out")
  echo "${r:-0} ${d:-100}"
}

kea_start() {
  fam=$1
  sed "s#@RUN@#$RUN#g" "$KEA/kea-dhcp$fam.json" > "$RUN/kea-dhcp$fam.json"
  rm -f "$RUN"/kea-leases*
  KEA_PIDFILE_DIR=$RUN KEA_LOCKFILE_DIR=$RUN ip netns exec tk-srv kea-dhcp$fam -c "$RUN/kea-dhcp$fam.json" > "$RUN/kea.stdout" 2>&1 &
  KPID=$!
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
  sleep 2
}
ours_stop() { kill "$SPID" 2>/dev/null; wait "$SPID" 2>/dev/null; SPID=""; }

RESULTS=$RUN/results
: > "$RESULTS"
# bench NAME FAMILY RATES [extra perfdhcp args]
bench() {
  name=$1; fam=$2; rates=$3; shift 3
  for rate in $rates; do
    up; kea_start "$fam"; k=$(perf "$fam" "$rate" "$@"); kea_stop
    up; ours_start; o=$(perf "$fam" "$rate" "$@"); ours_stop
    echo "$name $rate kea $k ours $o" | tee -a "$RESULTS"
  done
}

bench v4-DORA 4 "$RATES4"
bench v6-SARR 6 "$RATES6"
bench v6-SARR+PD 6 "$RATES6PD" -e address-and-prefix

echo
echo "Per target rate (achieved/s, worst drop %):"
awk '{printf "  %-11s target %6d   kea %9.1f/s %6.3f%%   ours %9.1f/s %6.3f%%\n", $1, $2, $4, $5, $7, $8}' "$RESULTS"
echo
echo "Best achieved rate at <1% drops (same perfdhcp runs, same topology):"
printf "  %-11s %12s %12s %8s\n" test kea ours ratio
awk '
  { if ($5 < 1 && $4 > k[$1]) k[$1] = $4; if ($8 < 1 && $7 > o[$1]) o[$1] = $7; seen[$1] = NR }
  END {
    n = 0; for (t in seen) order[seen[t]] = t
    for (i = 1; i <= NR; i++) if (i in order) {
      t = order[i]; r = (k[t] > 0) ? sprintf("%.2fx", o[t] / k[t]) : "n/a"
      printf "  %-11s %12.1f %12.1f %8s\n", t, k[t], o[t], r
    }
  }' "$RESULTS"
echo "(machine: $(nproc) cores, load average now: $(cut -d' ' -f1-3 /proc/loadavg))"
