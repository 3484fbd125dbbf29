package huawei_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/sim"
)

// BenchmarkProvision measures ONTs provisioned per minute: ont-add with a
// plan (traffic tables, profiles, the ONT, its native VLAN, then the
// service-port) against the simulator with no latency and with 50 ms per
// command, and how many command lines (round trips) one ont-add costs in
// the steady state (profiles and rate tables already there).
func BenchmarkProvision(b *testing.B) {
	for _, lat := range []time.Duration{0, 50 * time.Millisecond} {
		for _, proto := range protocols {
			b.Run(fmt.Sprintf("latency=%v/%s", lat, proto), func(b *testing.B) {
				r := newRig(b, proto, sim.OLTConfig{NoPaging: true}, nil)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
				defer cancel()
				if _, err := r.drv.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100}); err != nil {
					b.Fatal(err)
				}
				plan := &driver.Plan{Name: "p", DownKbps: 100000, UpKbps: 50000}
				// Warm up: the first ONT creates profiles and tables.
				if _, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: "0/2/15", SN: "4857544300FFFFFF", VLAN: 100, Plan: plan}); err != nil {
					b.Fatal(err)
				}
				r.olt.SetLatency(lat)
				before := r.olt.Commands()
				start := time.Now()
				n := 0
				b.ResetTimer()
				for b.Loop() {
					port := fmt.Sprintf("0/%d/%d", 1+n/(16*128)%2, n/128%16)
					if _, err := r.drv.ONTAdd(ctx, driver.ONTAddArgs{Port: port, SN: fmt.Sprintf("48575443%08X", n), VLAN: 100, Plan: plan}); err != nil {
						b.Fatal(err)
					}
					n++
				}
				b.StopTimer()
				b.ReportMetric(float64(n)/time.Since(start).Minutes(), "onts/min")
				b.ReportMetric(float64(r.olt.Commands()-before)/float64(n), "roundtrips/op")
			})
		}
	}
}
