package huawei_test

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei"
	"routerd.dev/services/olt/sim"
)

// Provision a subscriber's ONT on a simulated OLT: make the VLAN, register
// the ONT that autofind saw, with a 100/20 Mbit/s plan.
func ExampleDriver_ONTAdd() {
	ctx := context.Background()
	srv, err := sim.Start(ctx, sim.Config{OLTs: []sim.OLTConfig{{Autofind: []sim.AutofindONT{{Port: "0/1/0", SN: "48575443AABBCC01"}}}}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	host, port, _ := net.SplitHostPort(srv.SSHAddr())
	p, _ := strconv.Atoi(port)

	var olt driver.Driver
	d, err := huawei.New(huawei.Config{Host: host, Port: p, Protocol: "ssh", User: "root", Pass: "admin"}, huawei.Deps{})
	if err != nil {
		panic(err)
	}
	defer d.Close()
	olt = d

	if _, err := olt.VLANAdd(ctx, driver.VLANAddArgs{VLAN: 100, Uplinks: []string{"0/3/0"}}); err != nil {
		panic(err)
	}
	af, _ := olt.Autofind(ctx, driver.Options{})
	seen := af.ONTs[0]
	res, err := olt.ONTAdd(ctx, driver.ONTAddArgs{Port: seen.Port, SN: seen.SN, VLAN: 100, Description: "subscriber 42",
		Plan: &driver.Plan{Name: "home-100", DownKbps: 100000, UpKbps: 20000}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("ONT %s on %s is ONT id %d, VLAN %d\n", res.SN, res.Port, res.ONTID, res.VLAN)
	fmt.Println(res.Commands[len(res.Commands)-1])
	// Output:
	// ONT 48575443AABBCC01 on 0/1/0 is ONT id 0, VLAN 100
	// service-port vlan 100 gpon 0/1/0 ont 0 gemport 1 multi-service user-vlan 100 tag-transform translate inbound traffic-table index 10 outbound traffic-table index 11
}
