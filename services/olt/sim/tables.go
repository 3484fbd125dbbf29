package sim

import (
	"fmt"
	"sort"
	"strings"
)

func (s *session) displayServicePorts(t []string, col int) reply {
	st := s.olt.st
	var filter func(*servicePort) bool
	param := "{ <cr>|e2e<K>|inner-vlan<K>|sort-by<K>||<K> }:"
	switch {
	case len(t) == 3 && t[2] == "all":
		filter = func(*servicePort) bool { return true }
		param = "{ <cr>|sort-by<K>||<K> }:"
	case len(t) == 4 && t[2] == "vlan":
		v, _ := atoi(t[3])
		filter = func(sp *servicePort) bool { return sp.vlan == v }
	case len(t) >= 4 && t[2] == "port":
		pon := t[3]
		id := -1
		if len(t) == 6 && t[4] == "ont" {
			id, _ = atoi(t[5])
		}
		filter = func(sp *servicePort) bool { return sp.pon == pon && (id < 0 || sp.ont == id) }
		param = "{ <cr>|gemport<K>|sort-by<K> }:"
	default:
		return paramErr(col + 21)
	}
	return reply{param: param, run: func() string {
		var b strings.Builder
		n, up := 0, 0
		for _, i := range sortedKeys(st.sps) {
			sp := st.sps[i]
			if !filter(sp) {
				continue
			}
			n++
			state := "down"
			if p := st.port(sp.pon); p != nil && p.onts[sp.ont] != nil {
				if r, _, _ := p.onts[sp.ont].states(); r == "online" {
					state = "up"
					up++
				}
			}
			f, sl, pn, _ := splitFSP(sp.pon)
			fsp := fmt.Sprintf("%d/%d /%-2d ", f, sl, pn)
			attr := "common"
			if v := st.vlans[sp.vlan]; v != nil && v.attr != "" {
				attr = v.attr
			}
			fmt.Fprintf(&b, "  %6d %4d %-8s gpon %s%-5d%-6d%-6s%-11d%-5d%-5d%-5s\n",
				i, sp.vlan, attr, fsp, sp.ont, sp.gem, "vlan", sp.userVLAN, sp.in, sp.out, state)
		}
		if n == 0 {
			return failure("No service virtual port can be operated")
		}
		return "  Switch-Oriented Flow List\n" + rule77 +
			"   INDEX VLAN VLAN     PORT F/ S/ P VPI  VCI   FLOW  FLOW       RX   TX   STATE\n" +
			"         ID   ATTR     TYPE                    TYPE  PARA\n" + rule77 + b.String() + rule77 +
			fmt.Sprintf("   Total : %d  (Up/Down :    %d/%d)\n", n, up, n-up) +
			"   Note : F--Frame, S--Slot, P--Port,\n" +
			"          VPI indicates ONT ID for PON, VCI indicates GEM index for GPON,\n" +
			"          v/e--vlan/encap, pritag--priority-tagged,\n" +
			"          ppp--pppoe, ip--ipoe, ip4--ipv4oe, ip6--ipv6oe, vxl--vxlan.\n"
	}}
}

func (s *session) vlans() string {
	st := s.olt.st
	var b strings.Builder
	rule := "  -----------------------------------------------------------------------\n"
	b.WriteString(rule + "  VLAN   Type      Attribute  STND-Port NUM   SERV-Port NUM  VLAN-Con NUM\n" + rule)
	for _, id := range sortedKeys(st.vlans) {
		v := st.vlans[id]
		stnd, serv := 0, 0
		for _, m := range st.uplinks {
			if m[id] {
				stnd++
			}
		}
		for _, sp := range st.sps {
			if sp.vlan == id {
				serv++
			}
		}
		fmt.Fprintf(&b, "  %4d   %-9s %-10s %13d %15d %13s\n", id, v.typ, v.attr, stnd, serv, "-")
	}
	b.WriteString(rule + fmt.Sprintf("  Total: %d\n", len(st.vlans)))
	b.WriteString("  Note : STND-Port--standard port, SERV-Port--service virtual port,\n         VLAN-Con--vlan-connect\n")
	return b.String()
}

func (s *session) dbaProfiles() string {
	st := s.olt.st
	var b strings.Builder
	rule := "  ----------------------------------------------------------------------------\n"
	b.WriteString(rule)
	b.WriteString("  Profile-ID   type   Bandwidth      Fix        Assure        Max        Bind\n")
	b.WriteString("                     compensation    (kbps)     (kbps)        (kbps)     times\n")
	b.WriteString(rule)
	for _, id := range sortedKeys(st.dba) {
		p := st.dba[id]
		bind := 0
		for _, lp := range st.lines {
			for _, d := range lp.tcont {
				if d == id {
					bind++
				}
			}
		}
		assure := 0
		if p.typ == 3 {
			assure = 8192
		}
		fmt.Fprintf(&b, "  %10d %6d %12s %10d %10d %13d %9d\n", id, p.typ, "No", p.fix, assure, p.max, bind)
	}
	b.WriteString(rule)
	return b.String()
}

func (s *session) profiles(line bool) string {
	st := s.olt.st
	var b strings.Builder
	// Real firmware prints the line-profile list with one dash more.
	rule := rule77
	if line {
		rule = rule78
	}
	b.WriteString(rule + "  Profile-ID  Profile-name                                Binding times\n" + rule)
	count := 0
	bindings := func(id int) int {
		n := 0
		for _, p := range st.ports {
			for _, x := range p.onts {
				if (line && x.lineProfile == id) || (!line && x.srvProfile == id) {
					n++
				}
			}
		}
		return n
	}
	ids, names := sortedKeys(st.lines), func(id int) string { return st.lines[id].name }
	if !line {
		ids, names = sortedKeys(st.srvs), func(id int) string { return st.srvs[id].name }
	}
	for _, id := range ids {
		fmt.Fprintf(&b, "  %-11d %-43s %-12d\n", id, names(id), bindings(id))
		count++
	}
	b.WriteString(rule + fmt.Sprintf("  Total: %d\n", count))
	return b.String()
}

func (s *session) profileDetail(line bool, id int) string {
	st := s.olt.st
	if line {
		lp := st.lines[id]
		if lp == nil {
			return failure("The line profile does not exist")
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s  Profile-ID          :%d\n  Profile-name        :%s\n  Access-type         :GPON\n%s", rule78, id, lp.name, rule78)
		for _, tc := range sortedKeys(lp.tcont) {
			fmt.Fprintf(&b, "  <T-CONT %3d>          DBA Profile-ID:%d\n", tc, lp.tcont[tc])
		}
		for _, g := range sortedKeys(lp.gems) {
			fmt.Fprintf(&b, "    <Gem Index %d>  Mapping VLAN: %d\n", g, lp.gems[g])
		}
		b.WriteString(rule78)
		return b.String()
	}
	sp := st.srvs[id]
	if sp == nil {
		return failure("The service profile does not exist")
	}
	return fmt.Sprintf("%s  Profile-ID          :%d\n  Profile-name        :%s\n  Access-type         :GPON\n  ETH port number     :%d\n%s",
		rule78, id, sp.name, sp.ethPorts, rule78)
}

func (s *session) trafficTables() string {
	st := s.olt.st
	var b strings.Builder
	rule := "  ---------------------------------------------------------------------------\n"
	b.WriteString(rule + "  TID CIR      CBS        PIR      PBS        Pri Copy-policy     Pri-Policy\n")
	b.WriteString("      (kbps)   (bytes)    (kbps)   (bytes)\n" + rule)
	for _, id := range sortedKeys(st.tables) {
		t := st.tables[id]
		cir, cbs, pir, pbs := "off", "off", "off", "off"
		if t.cir >= 0 {
			cir, cbs, pir, pbs = fmt.Sprint(t.cir), fmt.Sprint(t.cir*32+2000), fmt.Sprint(t.pir), fmt.Sprint(t.pir*32+2000)
		}
		fmt.Fprintf(&b, "   %-3d%-9s%-11s%-9s%-11s%3d %-15s %10s\n", id, cir, cbs, pir, pbs, t.pri, "-", t.policy)
	}
	b.WriteString(rule + fmt.Sprintf("  Total Num : %d\n", len(st.tables)))
	return b.String()
}

// renderConfig prints the running configuration in the section layout of
// a MA5800's `display current-configuration`; section limits it to one
// `[name]` block.
func (o *OLT) renderConfig(section string) string {
	st := o.st
	type sec struct {
		name string
		b    strings.Builder
	}
	var secs []*sec
	add := func(name string) *strings.Builder {
		x := &sec{name: name}
		secs = append(secs, x)
		return &x.b
	}
	b := add("global-config")
	fmt.Fprintf(b, " sysname %s\n", st.sysname)
	for _, id := range sortedKeys(st.dba) {
		p := st.dba[id]
		if p.typ == 1 {
			fmt.Fprintf(b, " dba-profile add profile-id %d profile-name \"%s\" type1 fix %d\n", id, p.name, p.fix)
		} else {
			fmt.Fprintf(b, " dba-profile add profile-id %d profile-name \"%s\" type%d max %d\n", id, p.name, p.typ, p.max)
		}
	}
	for _, id := range sortedKeys(st.tables) {
		t := st.tables[id]
		if t.cir >= 0 && id >= 7 {
			fmt.Fprintf(b, " traffic table ip index %d name \"%s\" cir %d pir %d priority %d priority-policy local-setting\n",
				id, t.name, t.cir, t.pir, t.pri)
		}
	}
	for _, id := range sortedKeys(st.srvs) {
		p := st.srvs[id]
		fmt.Fprintf(b, " ont-srvprofile gpon profile-id %d profile-name \"%s\"\n  ont-port eth %d\n", id, p.name, p.ethPorts)
		for _, e := range sortedKeys(p.vlans) {
			fmt.Fprintf(b, "  port vlan eth %d translation %d user-vlan %d\n", e, p.vlans[e], p.vlans[e])
		}
		b.WriteString("  commit\n")
	}
	for _, id := range sortedKeys(st.lines) {
		p := st.lines[id]
		fmt.Fprintf(b, " ont-lineprofile gpon profile-id %d profile-name \"%s\"\n", id, p.name)
		for _, tc := range sortedKeys(p.tcont) {
			fmt.Fprintf(b, "  tcont %d dba-profile-id %d\n", tc, p.tcont[tc])
		}
		for _, g := range sortedKeys(p.gems) {
			fmt.Fprintf(b, "  gem add %d eth tcont 1 encrypt on\n", g)
			if p.gems[g] > 0 {
				fmt.Fprintf(b, "  gem mapping %d 0 vlan %d\n", g, p.gems[g])
			}
		}
		b.WriteString("  commit\n  quit\n")
	}
	b = add("vlan-config")
	for _, id := range sortedKeys(st.vlans) {
		if id != 1 {
			fmt.Fprintf(b, " vlan %d %s\n", id, st.vlans[id].typ)
		}
	}
	for _, id := range sortedKeys(st.vlans) {
		if a := st.vlans[id].attr; a != "" && a != "common" {
			fmt.Fprintf(b, " vlan attrib %d %s\n", id, a)
		}
		if d := st.vlans[id].desc; d != "" {
			fmt.Fprintf(b, " vlan desc %d description \"%s\"\n", id, d)
		}
	}
	for _, id := range sortedKeys(st.vlans) {
		for _, p := range sortedPorts(st.uplinks) {
			if st.uplinks[p][id] && id != 1 {
				f, sl, n, _ := splitFSP(p)
				fmt.Fprintf(b, " port vlan %d %d/%d %d\n", id, f, sl, n)
			}
		}
	}
	b = add("mpu")
	for _, sl := range st.uplinkSlot {
		fmt.Fprintf(b, "  <mpu-0/%d>\ninterface mpu 0/%d\n", sl, sl)
		for n := range 4 {
			if v := st.natives[fmt.Sprintf("0/%d/%d", sl, n)]; v != 1 {
				fmt.Fprintf(b, " native-vlan %d vlan %d\n", n, v)
			}
		}
	}
	b = add("gpon")
	for _, sl := range st.gponSlots {
		fmt.Fprintf(b, "  <gpon-0/%d>\n interface gpon 0/%d\n", sl, sl)
		var natives []string
		for n := range 16 {
			p := st.ports[fmt.Sprintf("0/%d/%d", sl, n)]
			if p.autofindOn {
				fmt.Fprintf(b, " port %d ont-auto-find enable\n", n)
			}
			for _, id := range sortedKeys(p.onts) {
				x := p.onts[id]
				fmt.Fprintf(b, " ont add %d %d sn-auth \"%s\" omci ont-lineprofile-id %d ont-srvprofile-id %d desc \"%s\"\n",
					n, id, x.sn, x.lineProfile, x.srvProfile, x.desc)
				if !x.active {
					fmt.Fprintf(b, " ont deactivate %d %d\n", n, id)
				}
				for _, e := range sortedKeys(x.natives) {
					natives = append(natives, fmt.Sprintf(" ont port native-vlan %d %d eth %d vlan %d priority 0\n", n, id, e, x.natives[e]))
				}
			}
		}
		b.WriteString(strings.Join(natives, ""))
	}
	b = add("bbs-config")
	for _, i := range sortedKeys(st.sps) {
		sp := st.sps[i]
		fmt.Fprintf(b, " service-port %d vlan %d gpon %s ont %d gemport %d multi-service user-vlan %d tag-transform %s",
			i, sp.vlan, sp.pon, sp.ont, sp.gem, sp.userVLAN, sp.transform)
		if sp.inner > 0 {
			fmt.Fprintf(b, " inner-vlan %d", sp.inner)
		}
		fmt.Fprintf(b, " inbound traffic-table index %d outbound traffic-table index %d\n", sp.in, sp.out)
	}
	b = add("btv-config")
	if len(st.igmpUsers) > 0 {
		b.WriteString(" btv\n")
		for _, i := range sortedKeys(st.igmpUsers) {
			fmt.Fprintf(b, " igmp user add service-port %d no-auth\n", i)
		}
		b.WriteString(" quit\n")
	}
	for _, v := range sortedKeys(st.mvlans) {
		fmt.Fprintf(b, " multicast-vlan %d\n", v)
		for _, i := range sortedKeys(st.mvlans[v]) {
			fmt.Fprintf(b, " igmp multicast-vlan member service-port %d\n", i)
		}
		b.WriteString(" quit\n")
	}
	b = add("ntp-config")
	ntp := append([]string(nil), st.ntp...)
	sort.Strings(ntp)
	for _, n := range ntp {
		fmt.Fprintf(b, " ntp-service unicast-server %s\n", n)
	}
	var out strings.Builder
	if section == "" {
		fmt.Fprintf(&out, "[Active: H901MPSA; Standby: H901MPSA]\n[Patch Info: SPH306]\n[MA5800V100R021: 6611]\n#\n")
	}
	found := false
	for _, x := range secs {
		if section != "" && x.name != section {
			continue
		}
		found = true
		fmt.Fprintf(&out, "[%s]\n  <%s>\n%s#\n", x.name, x.name, x.b.String())
	}
	if !found {
		return failure("The section does not exist")
	}
	if section == "" {
		out.WriteString("return\n")
	}
	return out.String()
}
