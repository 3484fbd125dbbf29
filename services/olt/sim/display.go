package sim

import (
	"fmt"
	"strings"
	"time"
)

const (
	rule77 = "  -----------------------------------------------------------------------------\n"
	rule78 = "  ------------------------------------------------------------------------------\n"
)

func splitFSP(s string) (f, sl, p int, ok bool) {
	n, err := fmt.Sscanf(s, "%d/%d/%d", &f, &sl, &p)
	return f, sl, p, err == nil && n == 3
}

// display answers every `display ...` command the simulator knows.
func (s *session) display(t []string, col int) reply {
	o := s.olt
	st := o.st
	line := strings.Join(t, " ")
	gpon := func(p string) string { return s.iface + "/" + p }
	switch {
	case line == "display version":
		return reply{run: func() string { return s.version() }}
	case line == "display time":
		return reply{run: func() string { return "  " + o.now().Format("2006-01-02 15:04:05-07:00") + "\n" }}
	case line == "display sysuptime":
		return reply{run: func() string {
			d := o.now().Sub(st.start)
			return fmt.Sprintf("  System up time: %d day %d hour %d minute %d second \n",
				int(d.Hours())/24, int(d.Hours())%24, int(d.Minutes())%60, int(d.Seconds())%60)
		}}
	case line == "display ntp-service status":
		return reply{run: func() string {
			if len(st.ntp) == 0 {
				return "  clock status: unsynchronized\n  clock stratum: 16\n  reference clock ID: none\n"
			}
			return fmt.Sprintf("  clock status: synchronized\n  clock stratum: 3\n  reference clock ID: %s\n", st.ntp[0])
		}}
	case line == "display board 0":
		return reply{run: s.boards}
	case len(t) == 3 && t[1] == "board":
		return reply{run: func() string { return s.boardPorts(t[2]) }}
	case strings.HasPrefix(line, "display ont autofind"):
		if len(t) != 4 {
			return paramErr(col + 21)
		}
		return reply{param: "{ <cr>||<K> }:", run: func() string {
			port := ""
			if t[3] != "all" {
				port = gpon(t[3])
			}
			return s.autofind(port)
		}}
	case strings.HasPrefix(line, "display ont info summary") && len(t) == 5:
		return reply{param: "{ <cr>||<K> }:", run: func() string { return s.summary(t[4]) }}
	case strings.HasPrefix(line, "display ont info by-sn") && len(t) == 5:
		return reply{run: func() string {
			port, x := st.ontBySN(strings.ToUpper(t[4]))
			if x == nil {
				return failure("The required ONT does not exist")
			}
			return s.ontDetail(port, x)
		}}
	case strings.HasPrefix(line, "display ont info"):
		// display ont info F S P all|ID ; F all ; (gpon) P all|ID
		a := t[3:]
		var ports []string
		var id string
		switch {
		case len(a) == 2 && a[1] == "all" && s.mode != "gpon":
			ports = sortedPorts(st.ports)
			id = "all"
		case len(a) == 2 && s.mode == "gpon":
			ports, id = []string{gpon(a[0])}, a[1]
		case len(a) == 4:
			ports, id = []string{a[0] + "/" + a[1] + "/" + a[2]}, a[3]
		default:
			return paramErr(col + 17)
		}
		return reply{param: "{ <cr>||<K> }:", run: func() string {
			if st.port(ports[0]) == nil {
				return failure("The port does not exist")
			}
			if id == "all" {
				return s.ontTable(ports)
			}
			n, _ := atoi(id)
			x := st.port(ports[0]).onts[n]
			if x == nil {
				return failure("The ONT does not exist")
			}
			return s.ontDetail(ports[0], x)
		}}
	case strings.HasPrefix(line, "display ont optical-info") && s.mode == "gpon" && len(t) == 5:
		return reply{run: func() string { return s.optical(gpon(t[3]), t[4]) }}
	case strings.HasPrefix(line, "display port state") && (s.mode == "gpon" || s.mode == "mpu") && len(t) == 4:
		return reply{run: func() string { return s.portState(gpon(t[3])) }}
	case strings.HasPrefix(line, "display statistics ont") && s.mode == "gpon" && len(t) == 5:
		return reply{run: func() string {
			p := st.port(gpon(t[3]))
			n, _ := atoi(t[4])
			if p == nil || p.onts[n] == nil {
				return failure("The ONT does not exist")
			}
			return s.stats(gpon(t[3])+"#"+t[4], "ont")
		}}
	case strings.HasPrefix(line, "display statistics port") && (s.mode == "gpon" || s.mode == "mpu") && len(t) == 4:
		return reply{run: func() string {
			if st.port(gpon(t[3])) == nil && st.uplinks[gpon(t[3])] == nil {
				return failure("The port does not exist")
			}
			return s.stats(gpon(t[3]), "port")
		}}
	case strings.HasPrefix(line, "display service-port"):
		return s.displayServicePorts(t, col)
	case line == "display vlan all":
		p := "{ <cr>|vlanattr<K>|vlantype<E><mux,standard,smart,super>||<K> }:"
		if o.model != MA5800 {
			p = "{ <cr>|vlanattr<K>|vlantype<E><mux,standard,smart,super> }:"
		}
		return reply{param: p, run: s.vlans}
	case line == "display dba-profile all":
		return reply{run: s.dbaProfiles}
	case line == "display ont-lineprofile gpon all" || line == "display ont-srvprofile gpon all":
		return reply{run: func() string { return s.profiles(t[1] == "ont-lineprofile") }}
	case len(t) == 5 && (t[1] == "ont-lineprofile" || t[1] == "ont-srvprofile") && t[3] == "profile-id":
		return reply{run: func() string {
			id, _ := atoi(t[4])
			return s.profileDetail(t[1] == "ont-lineprofile", id)
		}}
	case strings.HasPrefix(line, "display traffic table ip from-index"):
		return reply{run: s.trafficTables}
	case strings.HasPrefix(line, "display current-configuration"):
		section := ""
		if len(t) == 4 && t[2] == "section" {
			section = t[3]
		}
		return reply{param: "{ <cr>|include-default<K>|interface<K>|ont<K>|port<K>|section<K>|service-port<K>||<K> }:",
			run: func() string { return o.renderConfig(section) }}
	}
	return unknownAt(col + 8)
}

func (s *session) version() string {
	o := s.olt
	d := o.now().Sub(o.st.start)
	ver, patch := "MA5800V100R021C00", "SPH306"
	if o.model != MA5800 {
		ver, patch = "MA5600V800R018C10", "SPH213"
	}
	area := `  --------------------------------------------------
  Current Program Area : Area A 
  Current Data Area : Area A 

  Program Area A Version : %[1]s 
  Program Area B Version : %[1]s 

  Data Area A Version : %[1]s 
  Data Area B Version : %[1]s 
  --------------------------------------------------
`
	return fmt.Sprintf("\n  VERSION : %s\n  PATCH   : %s\n  PRODUCT : %s\n\n  Active Mainboard Running Area Information: \n", ver, patch, o.model) +
		fmt.Sprintf(area, ver) + "\n  Standby Mainboard Running Area Information: \n" + fmt.Sprintf(area, ver) +
		fmt.Sprintf("\n  Uptime is %d day(s), %d hour(s), %d minute(s), %d second(s)\n",
			int(d.Hours())/24, int(d.Hours())%24, int(d.Minutes())%60, int(d.Seconds())%60)
}

func (s *session) boards() string {
	st := s.olt.st
	var b strings.Builder
	b.WriteString("  -------------------------------------------------------------------------\n")
	b.WriteString("  SlotID  BoardName  Status          SubType0 SubType1    Online/Offline\n")
	b.WriteString("  -------------------------------------------------------------------------\n")
	rows := map[int][2]string{0: {"H901PISA", "Normal"}, 10: {"H903PILA", "Normal"}}
	for _, sl := range st.gponSlots {
		rows[sl] = [2]string{"H901GPHF", "Normal"}
	}
	rows[st.uplinkSlot[0]] = [2]string{"H901MPSA", "Active_normal"}
	rows[st.uplinkSlot[1]] = [2]string{"H901MPSA", "Standby_normal"}
	for sl := 0; sl <= 10; sl++ {
		if r, ok := rows[sl]; ok {
			fmt.Fprintf(&b, "  %-7d %-10s %-15s %-8s %-11s \n", sl, r[0], r[1], "", "")
		} else {
			fmt.Fprintf(&b, "  %-6d\n", sl)
		}
	}
	b.WriteString("  -------------------------------------------------------------------------\n")
	return b.String()
}

func (s *session) boardPorts(slot string) string {
	st := s.olt.st
	var ports []string
	for _, p := range sortedPorts(st.ports) {
		if strings.HasPrefix(p, slot+"/") {
			ports = append(ports, p)
		}
	}
	if len(ports) == 0 {
		return failure("The board does not exist")
	}
	var b strings.Builder
	b.WriteString("  ---------------------------------------\n  Board Name          : H901GPHF\n  Board Status        : Normal\n")
	b.WriteString("  ---------------------------------------\n  Power Status      Power-off cause                    Power-off Time\n")
	b.WriteString("  POWER-ON          -                                  -\n")
	b.WriteString("  -------------------------------------------------------------\n")
	b.WriteString("    Port   Port   min-distance   max-distance   Optical-module\n")
	b.WriteString("           type       (km)           (km)           status\n")
	b.WriteString("  -------------------------------------------------------------\n")
	for _, p := range ports {
		_, _, n, _ := splitFSP(p)
		fmt.Fprintf(&b, "   %2d     GPON        0              20             Online\n", n)
	}
	b.WriteString("  -------------------------------------------------------------\n")
	return b.String()
}

func (s *session) autofind(port string) string {
	st := s.olt.st
	var b strings.Builder
	n := 0
	for _, a := range st.autofind {
		if port != "" && a.Port != port {
			continue
		}
		n++
		b.WriteString("   ----------------------------------------------------------------------------\n")
		fmt.Fprintf(&b, "   Number              : %d\n   F/S/P               : %s\n", n, a.Port)
		fmt.Fprintf(&b, "   Ont SN              : %s (%s-%s)\n", a.SN, a.Vendor, a.SN[min(8, len(a.SN)):])
		fmt.Fprintf(&b, "   Password            : 0x00000000000000000000\n   Loid                :\n   Checkcode           :\n")
		fmt.Fprintf(&b, "   VendorID            : %s\n   Ont Version         : 159D.A\n", a.Vendor)
		fmt.Fprintf(&b, "   Ont SoftwareVersion : V5R020C10S213\n   Ont EquipmentID     : %s\n", a.EquipmentID)
		fmt.Fprintf(&b, "   Ont Customized Info : COMMON\n   Ont MAC             : 68E2-091F-%04X\n", n)
		fmt.Fprintf(&b, "   Ont Equipment SN    : 2150083877EGM2010498\n   Ont autofind time   : %s\n",
			a.Seen.Format("2006-01-02 15:04:05-07:00"))
		b.WriteString("   Multi channel       : -\n")
	}
	if n == 0 {
		return failure("The automatically found ONTs do not exist")
	}
	b.WriteString("   ----------------------------------------------------------------------------\n")
	return b.String()
}

func spacedFSP(p string) string {
	f, sl, n, _ := splitFSP(p)
	return fmt.Sprintf("%d/%2d/%d", f, sl, n)
}

func (x *ont) states() (run, cfg, match string) {
	switch {
	case !x.online:
		return "offline", "initial", "initial"
	case !x.active:
		return "offline", "normal", "match"
	}
	return "online", "normal", "match"
}

func (x *ont) control() string {
	if x.active {
		return "active"
	}
	return "deactivated"
}

func (s *session) ontTable(ports []string) string {
	st := s.olt.st
	var b strings.Builder
	b.WriteString(rule77)
	b.WriteString("  F/S/P   ONT         SN         Control     Run      Config   Match    Protect\n")
	b.WriteString("          ID                     flag        state    state    state    side \n")
	b.WriteString(rule77)
	total, online := 0, 0
	var desc strings.Builder
	for _, p := range ports {
		pp := st.port(p)
		for _, id := range sortedKeys(pp.onts) {
			x := pp.onts[id]
			run, cfg, match := x.states()
			total++
			if run == "online" {
				online++
			}
			fmt.Fprintf(&b, "  %s %4d  %s  %-11s %-8s %-8s %-8s no \n", spacedFSP(p), id, x.sn, x.control(), run, cfg, match)
			d := x.desc
			// Long descriptions wrap at a fixed column, as on the device.
			first := d[:min(len(d), 30)]
			fmt.Fprintf(&desc, "  %s %7d   %s\n", spacedFSP(p), id, first)
			for rest := d[len(first):]; rest != ""; {
				n := min(len(rest), 30)
				// Under the description's first character.
				fmt.Fprintf(&desc, "                   %s\n", rest[:n])
				rest = rest[n:]
			}
		}
	}
	if total == 0 {
		if len(ports) == 1 {
			return fmt.Sprintf("  In port %s , the total of ONTs are: 0, online: 0\n", spacedFSP(ports[0]))
		}
		return failure("There is no ONT available")
	}
	b.WriteString(rule77)
	b.WriteString("  F/S/P       ONT  Description  \n              ID  \n")
	b.WriteString(rule77)
	b.WriteString(desc.String())
	b.WriteString(rule77)
	if len(ports) == 1 {
		fmt.Fprintf(&b, "  In port %s , the total of ONTs are: %d, online: %d\n", spacedFSP(ports[0]), total, online)
	} else {
		fmt.Fprintf(&b, "  In frame 0, the total of ONTs are: %d, online: %d\n", total, online)
	}
	b.WriteString(rule77)
	return b.String()
}

func (s *session) ontDetail(port string, x *ont) string {
	run, cfg, match := x.states()
	since := s.olt.now().Sub(x.added)
	var b strings.Builder
	b.WriteString(rule77)
	kv := func(k, v string) { fmt.Fprintf(&b, "  %-24s: %s\n", k, v) }
	kv("F/S/P", port)
	kv("ONT-ID", fmt.Sprint(x.id))
	kv("Control flag", x.control())
	kv("Run state", run)
	kv("Config state", cfg)
	kv("Match state", match)
	kv("ONT distance(m)", fmt.Sprint(900+x.id*37))
	kv("Temperature", fmt.Sprintf("%.0f(C)", wobble(x.sn+"t", 45, 5, since)))
	kv("Authentic type", "SN-auth")
	kv("SN", fmt.Sprintf("%s (%s-%s)", x.sn, vendorOf(x.sn), x.sn[8:]))
	kv("Management mode", "OMCI")
	kv("Description", x.desc)
	kv("Last down cause", cmpStr(x.downCause, "-"))
	kv("Last up time", x.added.Format("2006-01-02 15:04:05-07:00"))
	b.WriteString(rule77)
	lp, sp := s.olt.st.lines[x.lineProfile], s.olt.st.srvs[x.srvProfile]
	fmt.Fprintf(&b, "  Line profile ID      : %d\n  Line profile name    : %s\n", x.lineProfile, lp.name)
	b.WriteString(rule77)
	fmt.Fprintf(&b, "  Service profile ID   : %d\n  Service profile name : %s\n", x.srvProfile, sp.name)
	b.WriteString(rule77)
	return b.String()
}

func (s *session) summary(port string) string {
	st := s.olt.st
	p := st.port(port)
	if p == nil {
		return failure("The port does not exist")
	}
	online := 0
	for _, x := range p.onts {
		if r, _, _ := x.states(); r == "online" {
			online++
		}
	}
	var a, c strings.Builder
	for _, id := range sortedKeys(p.onts) {
		x := p.onts[id]
		run, _, _ := x.states()
		fmt.Fprintf(&a, "  %-4d %-7s %s -                   -                        \n", id, run, x.added.Format("2006-01-02 15:04:05"))
		since := s.olt.now().Sub(x.added)
		power := fmt.Sprintf("%.2f/%.2f", wobble(x.sn+"rx", -20, 1.5, since), wobble(x.sn+"tx", 2.2, 0.2, since))
		if run != "online" {
			power = "-/-"
		}
		fmt.Fprintf(&c, "  %-3d %s EG8145V5         %-5d %-12s %-20s\n", id, x.sn, 900+id*37, power, x.desc)
	}
	return rule78 + fmt.Sprintf("  In port %s, the total of ONTs are: %d, online: %d\n", port, len(p.onts), online) + rule78 +
		"  ONT  Run     Last                Last                Last                   \n" +
		"  ID   State   UpTime              DownTime            DownCause\n" + rule78 + a.String() + rule78 +
		"  ONT        SN        Type          Distance Rx/Tx power  Description\n" +
		"  ID                                    (m)      (dBm)\n" + rule78 + c.String() + rule78
}

func (s *session) optical(port, which string) string {
	st := s.olt.st
	p := st.port(port)
	if p == nil {
		return failure("The port does not exist")
	}
	now := s.olt.now()
	if which != "all" {
		n, _ := atoi(which)
		x := p.onts[n]
		if x == nil {
			return failure("The ONT does not exist")
		}
		if r, _, _ := x.states(); r != "online" {
			return failure("The ONT is not online")
		}
		since := now.Sub(x.added)
		return rule77 + fmt.Sprintf("  ONU NNI port ID                        : 0\n  Module type                            : GPON\n"+
			"  Rx optical power(dBm)                  : %.2f\n  Tx optical power(dBm)                  : %.2f\n"+
			"  Laser bias current(mA)                 : %.0f\n  Temperature(C)                         : %.0f\n"+
			"  Voltage(V)                             : %.3f\n  OLT Rx ONT optical power(dBm)          : %.2f\n",
			wobble(x.sn+"rx", -20, 1.5, since), wobble(x.sn+"tx", 2.2, 0.2, since), wobble(x.sn+"b", 8, 1, since),
			wobble(x.sn+"t", 45, 5, since), wobble(x.sn+"v", 3.2, 0.05, since), wobble(x.sn+"orx", -22, 1.5, since)) + rule77
	}
	var b strings.Builder
	b.WriteString("  ----------------------------------------------------------------------------- \n")
	b.WriteString("  ONT  Rx power  Tx power  OLT Rx ONT  Temperature  Voltage  Current  Distance  \n")
	b.WriteString("  ID   (dBm)     (dBm)     power(dBm)  (C)          (V)      (mA)     (m)       \n")
	b.WriteString("  ----------------------------------------------------------------------------- \n")
	for _, id := range sortedKeys(p.onts) {
		x := p.onts[id]
		if r, _, _ := x.states(); r != "online" {
			continue
		}
		since := now.Sub(x.added)
		fmt.Fprintf(&b, "  %3d  %-9.2f %-9.2f %-11.2f %-12.0f %-8.3f %-8.0f %-10d\n", id,
			wobble(x.sn+"rx", -20, 1.5, since), wobble(x.sn+"tx", 2.2, 0.2, since), wobble(x.sn+"orx", -22, 1.5, since),
			wobble(x.sn+"t", 45, 5, since), wobble(x.sn+"v", 3.2, 0.05, since), wobble(x.sn+"b", 8, 1, since), 900+id*37)
	}
	b.WriteString(rule77)
	return b.String()
}

func (s *session) portState(port string) string {
	if s.olt.st.port(port) == nil && s.olt.st.uplinks[port] == nil {
		return failure("The port does not exist")
	}
	since := s.olt.now().Sub(s.olt.st.start)
	return "  ----------------------------------------------------------------------------\n" +
		fmt.Sprintf("  F/S/P                         : %s\n  Optical Module status         : Online\n"+
			"  Port state                    : Online\n  Laser state                   : Normal\n"+
			"  Available bandwidth(Kbps)     : 1238110\n  Temperature(C)                : %.0f\n"+
			"  TX Bias current(mA)           : %.0f\n  Supply Voltage(V)             : %.2f\n"+
			"  TX power(dBm)                 : %.2f\n", port, wobble(port+"t", 42, 3, since),
			wobble(port+"b", 30, 2, since), wobble(port+"v", 3.3, 0.03, since), wobble(port+"tx", 4, 0.3, since)) +
		"  ----------------------------------------------------------------------------\n"
}

func (s *session) stats(key, kind string) string {
	since := s.olt.now().Sub(s.olt.st.start) + time.Hour
	var b strings.Builder
	b.WriteString(rule77)
	row := func(k string, rate float64) { fmt.Fprintf(&b, "  %-39s: %d\n", k, counter(key+k, rate, since)) }
	if kind == "ont" {
		row("Upstream frames received", 900)
		row("Upstream bytes received", 400000)
		row("Downstream frames sent", 2500)
		row("Downstream bytes sent", 2500000)
		row("Upstream frames dropped", 0.01)
	} else {
		row("Received frames", 9000)
		row("Received bytes", 4000000)
		row("Sent frames", 25000)
		row("Sent bytes", 25000000)
		row("Received error frames", 0.02)
	}
	b.WriteString(rule77)
	return b.String()
}

func cmpStr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
