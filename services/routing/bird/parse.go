package bird

import (
	"net/netip"
	"strconv"
	"strings"
)

// Protocol is one protocol of `show protocols all`.
type Protocol struct {
	Name, Proto, Table, State, Since, Info string
	// BGPState is "BGP state:" (Established, Active, Connect, Idle...).
	BGPState  string
	LastError string
	Neighbor  string
	// RPKI: "Status:" and "Last update: before N s" (-1 when never).
	Status      string
	LastUpdateS float64
	// Summed over the protocol's channels ("Routes:" lines).
	Imported, Filtered, Exported, Preferred int64
}

// ParseProtocols reads the reply of `show protocols all`.
func ParseProtocols(lines []Line) []Protocol {
	var out []Protocol
	var cur *Protocol
	for _, l := range lines {
		switch {
		case l.Code == 1002:
			f := strings.Fields(l.Text)
			if len(f) < 4 {
				continue
			}
			p := Protocol{Name: f[0], Proto: f[1], Table: f[2], State: f[3], LastUpdateS: -1}
			rest := f[4:]
			// "iso long" since: date and time, two fields.
			if len(rest) >= 2 && strings.Count(rest[0], "-") == 2 && strings.Contains(rest[1], ":") {
				p.Since = rest[0] + " " + rest[1]
				rest = rest[2:]
			} else if len(rest) >= 1 {
				p.Since = rest[0]
				rest = rest[1:]
			}
			p.Info = strings.Join(rest, " ")
			out = append(out, p)
			cur = &out[len(out)-1]
		case l.Code == 1006 && cur != nil:
			k, v, ok := strings.Cut(strings.TrimSpace(l.Text), ":")
			if !ok {
				continue
			}
			v = strings.TrimSpace(v)
			switch k {
			case "BGP state":
				cur.BGPState = v
			case "Last error":
				cur.LastError = v
			case "Neighbor address":
				cur.Neighbor = v
			case "Status":
				cur.Status = v
			case "Last update":
				if f := strings.Fields(v); len(f) >= 2 && f[0] == "before" {
					if n, err := strconv.ParseFloat(f[1], 64); err == nil {
						cur.LastUpdateS = n
					}
				}
			case "Routes":
				for _, part := range strings.Split(v, ",") {
					f := strings.Fields(part)
					if len(f) != 2 {
						continue
					}
					n, err := strconv.ParseInt(f[0], 10, 64)
					if err != nil {
						continue
					}
					switch f[1] {
					case "imported":
						cur.Imported += n
					case "filtered":
						cur.Filtered += n
					case "exported":
						cur.Exported += n
					case "preferred":
						cur.Preferred += n
					}
				}
			}
		}
	}
	return out
}

// ParseBFD reads `show bfd sessions`: neighbour address to state.
func ParseBFD(lines []Line) map[string]string {
	out := map[string]string{}
	for _, l := range lines {
		f := strings.Fields(l.Text)
		if len(f) < 3 {
			continue
		}
		if a, err := netip.ParseAddr(f[0]); err == nil {
			out[a.String()] = f[2]
		}
	}
	return out
}

// Neighbor is one line of `show ospf neighbors`.
type Neighbor struct {
	Proto, RouterID, State, Iface, IP string
}

// ParseOSPFNeighbors reads `show ospf neighbors` (all instances).
func ParseOSPFNeighbors(lines []Line) []Neighbor {
	var out []Neighbor
	proto := ""
	for _, l := range lines {
		t := strings.TrimSpace(l.Text)
		if strings.HasSuffix(t, ":") && !strings.Contains(t, " ") {
			proto = strings.TrimSuffix(t, ":")
			continue
		}
		f := strings.Fields(t)
		if len(f) < 6 {
			continue
		}
		if _, err := netip.ParseAddr(f[0]); err != nil {
			continue
		}
		out = append(out, Neighbor{Proto: proto, RouterID: f[0], State: f[2], Iface: f[4], IP: f[5]})
	}
	return out
}

// ParseCount reads `show route ... count`: "N of M routes for K networks".
func ParseCount(lines []Line) int64 {
	for _, l := range lines {
		f := strings.Fields(l.Text)
		if len(f) >= 3 && f[1] == "of" {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			return n
		}
	}
	return 0
}
