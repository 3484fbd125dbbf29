package bird

import (
	"bufio"
	"strings"
	"testing"
)

// Captured from BIRD 2.0.12 over the control socket.
const protocolsAll = `0001 BIRD 2.0.12 ready.
2002-Name       Proto      Table      State  Since         Info
1002-device1    Device     ---        up     2026-11-24 14:24:24  
1006-
1002-bgp_up_h1  BGP        ---        up     2026-11-24 14:24:34  Established   
1006-  BGP state:          Established
     Neighbor address: 198.18.0.1
     Neighbor AS:      65000
     Local AS:         65010
   Channel ipv4
     State:          UP
     Table:          master4
     Routes:         1 imported, 1 filtered, 1 exported, 1 preferred
 
1002-bgp_down   BGP        ---        start  2026-11-24 14:24:24  Active        Socket: Connection refused
1006-  BGP state:          Active
     Neighbor address: 198.18.0.5
     Last error:       Socket: Connection refused
 
1002-rpki1      RPKI       ---        up     2026-11-24 14:41:19  Established
1006-  Cache server:     127.0.0.1
     Status:           Established
     Last update:      before 3.620 s
   Channel roa4
     Routes:         1 imported, 0 exported, 1 preferred
   Channel roa6
     Routes:         2 imported, 0 exported, 0 preferred
 
0000 
`

func lines(t *testing.T, text string) []Line {
	t.Helper()
	r := bufio.NewReader(strings.NewReader(text))
	if _, err := readReply(r); err != nil { // greeting
		t.Fatal(err)
	}
	out, err := readReply(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestParseProtocols(t *testing.T) {
	ps := ParseProtocols(lines(t, protocolsAll))
	if len(ps) != 4 {
		t.Fatalf("%d protocols: %+v", len(ps), ps)
	}
	up := ps[1]
	if up.Name != "bgp_up_h1" || up.BGPState != "Established" || up.Since != "2026-11-24 14:24:34" || up.Info != "Established" ||
		up.Imported != 1 || up.Filtered != 1 || up.Exported != 1 || up.Preferred != 1 || up.Neighbor != "198.18.0.1" {
		t.Errorf("up: %+v", up)
	}
	down := ps[2]
	if down.State != "start" || down.BGPState != "Active" || down.LastError != "Socket: Connection refused" || down.Info != "Active Socket: Connection refused" {
		t.Errorf("down: %+v", down)
	}
	rpki := ps[3]
	if rpki.Status != "Established" || rpki.LastUpdateS != 3.62 || rpki.Imported != 3 {
		t.Errorf("rpki: %+v", rpki)
	}
}

func TestReplyError(t *testing.T) {
	r := bufio.NewReader(strings.NewReader("0001 BIRD ready.\n8003 No protocols match\n"))
	_, _ = readReply(r)
	_, err := readReply(r)
	if e, ok := err.(*Error); !ok || e.Code != 8003 || e.Text != "No protocols match" {
		t.Fatalf("%v", err)
	}
}

func TestParseBFDAndOSPF(t *testing.T) {
	bfd := ParseBFD([]Line{{1020, "bfd1:"}, {1020, "IP address                Interface  State      Since         Interval  Timeout"},
		{1020, "198.18.0.1                up0        Up         2026-11-24 14:40:01    0.100    0.500"}})
	if bfd["198.18.0.1"] != "Up" {
		t.Errorf("bfd: %v", bfd)
	}
	n := ParseOSPFNeighbors([]Line{{1013, "ospf4:"}, {1013, "Router ID   \tPri\t     State     \tDTime\tInterface  Router IP"},
		{1013, "198.18.0.1\t 10\tFull/DR   \t35.123\tup0       198.18.0.1"}})
	if len(n) != 1 || n[0] != (Neighbor{"ospf4", "198.18.0.1", "Full/DR", "up0", "198.18.0.1"}) {
		t.Errorf("ospf: %+v", n)
	}
	if c := ParseCount([]Line{{14, "3 of 3 routes for 3 networks in table master4"}}); c != 3 {
		t.Errorf("count %d", c)
	}
}
