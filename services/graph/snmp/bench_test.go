package snmp

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/gosnmp/gosnmp"

	"routerd.dev/shared/testenv"
)

// BenchmarkClientTableBulkWalk walks the whole per-client table with
// GetBulk the way snmpbulkwalk does (one repeater, max-repetitions 10,
// each request starting at the last name answered), through Handle: the
// request's decoding, the lookups and the answer's encoding, without the
// socket. Rows are an in-memory table, every third without counters.
// ns/varbind is the cost of one variable; it stays flat from 1,000 to
// 100,000 rows if a lookup is the O(log n) it should be.
func BenchmarkClientTableBulkWalk(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		for _, reps := range []uint32{10, 50} {
			b.Run(fmt.Sprintf("clients=%d/reps=%d", n, reps), func(b *testing.B) {
				a, _ := testAgent(b, n)
				root := ClientTableOID.String()
				var binds int
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					binds = 0
					cur := root
					for done := false; !done; {
						req, _ := (&gosnmp.SnmpPacket{Version: gosnmp.Version2c, Community: community, PDUType: gosnmp.GetBulkRequest,
							RequestID: 1, MaxRepetitions: reps, Variables: vars(cur)}).MarshalMsg()
						resp, err := (&gosnmp.GoSNMP{}).SnmpDecodePacket(a.Handle(req))
						if err != nil {
							b.Fatal(err)
						}
						for _, v := range resp.Variables {
							if v.Type == gosnmp.EndOfMibView || !strings.HasPrefix(v.Name, root+".") {
								done = true
								break
							}
							cur = v.Name
							binds++
						}
					}
				}
				if want := n*4 + 2*(n-(n+2)/3); binds != want {
					b.Fatalf("walked %d variables, want %d", binds, want)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(binds), "ns/varbind")
				b.ReportMetric(float64(binds), "varbinds/walk")
			})
		}
	}
}

// BenchmarkClientTableSnmpbulkwalk is the same walk over UDP by net-snmp's
// snmpbulkwalk (-Cr10, its default) against the agent listening in a
// namespace of the benchmark's own: what an operator's poller sees,
// snmpbulkwalk's own decoding and printing included.
func BenchmarkClientTableSnmpbulkwalk(b *testing.B) {
	if _, err := exec.LookPath("snmpbulkwalk"); err != nil {
		b.Skip("snmpbulkwalk not installed (Debian package snmp)")
	}
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) {
			ns := testenv.Netns(b)
			testenv.Run(b, ns, "ip", "link", "set", "lo", "up")
			a, _ := testAgent(b, n)
			if err := a.Listen(ns, 16161); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(a.Close)
			var lines int
			for b.Loop() {
				out, err := exec.Command("nsenter", "--net="+ns.Path(), "snmpbulkwalk", "-v2c", "-c", community, "-Cr10", "-On", "-m", "", "-t", "5", "-r", "0",
					"udp:127.0.0.1:"+strconv.Itoa(16161), ClientTableOID.String()).Output()
				if err != nil {
					b.Fatal(err)
				}
				// Every variable's line; net-snmp prints the endOfMibView
				// that ends the walk as a line of its own.
				lines = strings.Count(string(out), "\n") - strings.Count(string(out), "No more variables left")
			}
			if want := n*4 + 2*(n-(n+2)/3); lines != want {
				b.Fatalf("walked %d variables, want %d", lines, want)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(lines), "ns/varbind")
		})
	}
}
