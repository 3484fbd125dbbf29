package shaper_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"routerd.dev/shared/testenv"
)

// TestFullKernelClassMemory measures what one class costs the kernel, the
// price of a spare class: ROUTERD_BENCH_CLASSMEM classes (skipped when
// unset) made by `tc -batch` as the shaper lays them out (groups of 256
// under one root on a veth), with an fq_codel leaf each where the kernel
// has it (the VM tier) or HTB's own pfifo, three times; the kernel's
// unreclaimable slab and the memory available before, after, and after the
// link is deleted. ROUTERD_BENCH_CLASSMEM_LEAF=pfifo leaves HTB's pfifo
// even where fq_codel is. Run in the VM tier (a kernel of its own: classes
// made on the host would lengthen the host's global list for everyone):
//
//	VM_RUN='^TestFullKernelClassMemory$' VM_ENV='ROUTERD_BENCH_CLASSMEM=2560' deploy/vm/gotest.sh ./services/shaper/
func TestFullKernelClassMemory(t *testing.T) {
	v := os.Getenv("ROUTERD_BENCH_CLASSMEM")
	if v == "" {
		t.Skip("ROUTERD_BENCH_CLASSMEM unset: the class memory measurement is not run")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 256 {
		t.Fatalf("ROUTERD_BENCH_CLASSMEM: %q", v)
	}
	ns := testenv.Netns(t)
	leaf := "fq_codel"
	testenv.Run(t, ns, "ip", "link", "add", "m0", "type", "veth", "peer", "name", "m0p")
	testenv.Run(t, ns, "ip", "link", "set", "m0", "up")
	testenv.Run(t, ns, "tc", "qdisc", "add", "dev", "m0", "root", "handle", "7264:", "htb")
	testenv.Run(t, ns, "tc", "class", "add", "dev", "m0", "parent", "7264:", "classid", "7264:1", "htb", "rate", "1gbit")
	if os.Getenv("ROUTERD_BENCH_CLASSMEM_LEAF") == "pfifo" {
		leaf = "pfifo"
	} else if out, err := exec.Command("nsenter", "--net="+ns.Path(), "tc", "qdisc", "add", "dev", "m0", "parent", "7264:1", "fq_codel").CombinedOutput(); err != nil {
		t.Logf("no fq_codel (%s): HTB's pfifo leaves", strings.TrimSpace(string(out)))
		leaf = "pfifo"
	}
	testenv.Run(t, ns, "ip", "link", "del", "m0")
	var b strings.Builder
	for i := 0; i < n; i++ {
		g, m := i/256+1, i%256+1
		if m == 1 {
			fmt.Fprintf(&b, "class add dev m0 parent 7264: classid 7264:%x htb rate 100gbit\n", g)
			fmt.Fprintf(&b, "qdisc add dev m0 parent 7264:%x handle %x: htb\n", g, g)
		}
		fmt.Fprintf(&b, "class add dev m0 parent %x: classid %x:%x htb rate 1mbit\n", g, g, m)
		if leaf == "fq_codel" {
			fmt.Fprintf(&b, "qdisc add dev m0 parent %x:%x fq_codel\n", g, m)
		}
	}
	file := filepath.Join(t.TempDir(), "classes")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 3; round++ {
		testenv.Run(t, ns, "ip", "link", "add", "m0", "type", "veth", "peer", "name", "m0p")
		testenv.Run(t, ns, "tc", "qdisc", "add", "dev", "m0", "root", "handle", "7264:", "htb")
		before := meminfo(t)
		testenv.Run(t, ns, "tc", "-batch", file)
		built := meminfo(t)
		testenv.Run(t, ns, "ip", "link", "del", "m0")
		gone := meminfo(t)
		per := func(k string, a, b map[string]int64) float64 { return float64(b[k]-a[k]) * 1024 / float64(n) }
		t.Logf("classmem: round %d: %d classes with %s leaves: per class SUnreclaim +%.0f B, MemAvailable -%.0f B; after deleting the link SUnreclaim %+.0f B, MemAvailable %+.0f B per class",
			round, n, leaf, per("SUnreclaim", before, built), -per("MemAvailable", before, built),
			per("SUnreclaim", built, gone), per("MemAvailable", built, gone))
	}
}

// meminfo reads /proc/meminfo in kB.
func meminfo(t *testing.T) map[string]int64 {
	t.Helper()
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			out[k] = n
		}
	}
	return out
}
