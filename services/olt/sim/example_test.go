package sim_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"routerd.dev/services/olt/sim"
)

// Start one simulated MA5800 on a free loopback port, plug an ONT into
// PON port 0/1/0, and read its autofind list over telnet the way an
// operator would.
func ExampleStart() {
	srv, err := sim.Start(context.Background(), sim.Config{OLTs: []sim.OLTConfig{{Name: "LAB-OLT", NoPaging: true}}})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	srv.OLT(0).PlugONT(sim.AutofindONT{Port: "0/1/0", SN: "48575443AABBCC01"})

	c, err := net.Dial("tcp", srv.TelnetAddr())
	if err != nil {
		panic(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	readUntil := func(s string) string {
		var b strings.Builder
		for !strings.HasSuffix(strings.TrimRight(b.String(), " "), s) {
			x, err := r.ReadByte()
			if err != nil {
				panic(err)
			}
			b.WriteByte(x)
		}
		return b.String()
	}
	readUntil("User name:")
	fmt.Fprint(c, "root\r\n")
	readUntil("User password:")
	fmt.Fprint(c, "admin\r\n")
	readUntil("LAB-OLT>")
	fmt.Fprint(c, "enable\r\n")
	readUntil("LAB-OLT#")
	fmt.Fprint(c, "display ont autofind all\r\n")
	readUntil("}:")
	fmt.Fprint(c, "\r\n")
	for _, l := range strings.Split(readUntil("LAB-OLT#"), "\r\n") {
		if strings.Contains(l, "Ont SN") || strings.Contains(l, "F/S/P") {
			fmt.Println(strings.TrimSpace(l))
		}
	}
	// Output:
	// F/S/P               : 0/1/0
	// Ont SN              : 48575443AABBCC01 (HWTC-AABBCC01)
}
