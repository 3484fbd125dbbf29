package sim

import (
	"fmt"
	"strconv"
	"strings"
)

func unknownAt(col int) reply {
	return reply{run: func() string {
		return strings.Repeat(" ", col) + "^\n  % Unknown command, the error locates at '^'\n"
	}}
}

func paramErr(col int) reply {
	return reply{run: func() string {
		return strings.Repeat(" ", col) + "^\n  % Parameter error, the error locates at '^'\n"
	}}
}

func failure(msg string) string { return "  Failure: " + msg + "\n" }

func text(s string) reply { return reply{run: func() string { return s }} }

func atoi(s string) (int, bool) {
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// arg returns the word after key in t, or "".
func arg(t []string, key string) string {
	for i := 0; i+1 < len(t); i++ {
		if t[i] == key {
			return t[i+1]
		}
	}
	return ""
}

func argInt(t []string, key string) (int, bool) { return atoi(arg(t, key)) }

// dispatch decides what a command line does in the session's mode. col is
// the prompt width, for the caret of error messages.
func (s *session) dispatch(line string, col int) reply {
	t := tokens(line)
	o := s.olt
	switch {
	case t[0] == "display":
		return s.display(t, col)
	case line == "enable" && s.mode == "user":
		return reply{run: func() string { s.mode = "priv"; return "" }}
	case line == "config" && s.mode == "priv":
		return reply{run: func() string { s.mode = "config"; return "" }}
	case line == "undo smart":
		return reply{run: func() string { s.noSmart = true; return "  Interactive function is disabled\n" }}
	case line == "smart":
		return reply{run: func() string { s.noSmart = false; return "" }}
	case line == "screen-length 0 temporary" || strings.HasPrefix(line, "scroll"):
		return reply{param: "{ <cr>||<K> }:", run: func() string { s.noPaging = true; return "" }}
	case line == "undo interactive" || line == "undo idle-timeout":
		return text("")
	case line == "return":
		return reply{run: func() string { s.mode = "priv"; return "" }}
	case line == "quit":
		switch s.mode {
		case "user", "priv":
			return reply{confirm: "  Check whether system data has been changed. Please save data before logout.\nAre you sure to log out? (y/n)[n]:",
				run: func() string { s.closed = true; return "" }}
		case "config":
			return reply{run: func() string { s.mode = "priv"; return "" }}
		default:
			return reply{run: func() string { s.mode = "config"; return "" }}
		}
	case line == "save" && s.mode != "user":
		return reply{param: "{ <cr>|configuration<K>|data<K> }:", run: func() string {
			o.st.saved = true
			return "  It will take several minutes to save configuration file, please wait...\n" +
				"  The data of 9 slot's control board is saved completely\n"
		}}
	}
	switch s.mode {
	case "config":
		return s.config(t, line, col)
	case "gpon":
		return s.gpon(t, col)
	case "mpu":
		if len(t) == 4 && t[0] == "native-vlan" && t[2] == "vlan" {
			return reply{run: func() string {
				v, _ := atoi(t[3])
				if o.st.vlans[v] == nil {
					return failure("The VLAN does not exist")
				}
				o.st.natives[s.iface+"/"+t[1]] = v
				return ""
			}}
		}
	case "line":
		return s.lineProfile(t, col)
	case "srv":
		return s.srvProfile(t, col)
	case "btv", "mvlan":
		return s.multicast(t, col)
	}
	return unknownAt(col)
}

// multicast answers the IGMP commands of `btv` and `multicast-vlan V`.
func (s *session) multicast(t []string, col int) reply {
	st := s.olt.st
	member := s.mode == "mvlan" && len(t) == 5 && strings.Join(t[:4], " ") == "igmp multicast-vlan member service-port"
	user := s.mode == "btv" && len(t) >= 5 && strings.Join(t[:4], " ") == "igmp user add service-port"
	if !member && !user {
		return unknownAt(col)
	}
	return reply{run: func() string {
		idx, _ := atoi(t[4])
		if st.sps[idx] == nil {
			return failure("The service virtual port does not exist")
		}
		if user {
			if st.igmpUsers[idx] {
				return failure("The IGMP user already exists")
			}
			st.igmpUsers[idx] = true
			return ""
		}
		if !st.igmpUsers[idx] {
			return failure("The service port is not an IGMP user")
		}
		st.mvlans[s.profID][idx] = true
		return ""
	}}
}

func (s *session) config(t []string, line string, col int) reply {
	st := s.olt.st
	switch {
	case t[0] == "sysname" && len(t) == 2:
		return reply{run: func() string { st.sysname = t[1]; return "" }}
	case t[0] == "interface" && len(t) == 3 && (t[1] == "gpon" || t[1] == "mpu"):
		return reply{run: func() string {
			found := false
			for p := range st.ports {
				found = found || strings.HasPrefix(p, t[2]+"/")
			}
			for p := range st.uplinks {
				found = found || (t[1] == "mpu" && strings.HasPrefix(p, t[2]+"/"))
			}
			if !found {
				return failure("The board does not exist")
			}
			s.iface = t[2]
			s.mode = map[string]string{"gpon": "gpon", "mpu": "mpu"}[t[1]]
			return ""
		}}
	case t[0] == "vlan" && len(t) >= 3 && t[1] == "desc":
		return reply{run: func() string {
			v, _ := atoi(t[2])
			if st.vlans[v] == nil {
				return failure("The VLAN does not exist")
			}
			st.vlans[v].desc = arg(t, "description")
			return ""
		}}
	case t[0] == "vlan" && len(t) == 4 && t[1] == "attrib":
		return reply{run: func() string {
			v, _ := atoi(t[2])
			if st.vlans[v] == nil {
				return failure("The VLAN does not exist")
			}
			st.vlans[v].attr = t[3]
			return ""
		}}
	case t[0] == "vlan" && len(t) == 3:
		v, ok := atoi(t[1])
		if !ok || v < 1 || v > 4094 {
			return paramErr(col + 5)
		}
		return reply{run: func() string {
			if st.vlans[v] != nil {
				return failure("The VLAN already exists")
			}
			st.vlans[v] = &vlan{typ: t[2], attr: "common"}
			return ""
		}}
	case t[0] == "undo" && len(t) == 3 && t[1] == "vlan":
		return reply{run: func() string {
			v, _ := atoi(t[2])
			if st.vlans[v] == nil {
				return failure("The VLAN does not exist")
			}
			for _, sp := range st.sps {
				if sp.vlan == v {
					return failure("The VLAN has service virtual ports")
				}
			}
			delete(st.vlans, v)
			for _, m := range st.uplinks {
				delete(m, v)
			}
			return ""
		}}
	case (t[0] == "port" || (t[0] == "undo" && len(t) > 1 && t[1] == "port")) && strings.Contains(line, "port vlan"):
		undo := t[0] == "undo"
		if undo {
			t = t[1:]
		}
		if len(t) != 5 {
			return paramErr(col)
		}
		return reply{run: func() string {
			v, _ := atoi(t[2])
			port := t[3] + "/" + t[4]
			m, ok := st.uplinks[port]
			if !ok {
				return failure("The port does not exist")
			}
			if st.vlans[v] == nil {
				return failure("The VLAN does not exist")
			}
			if undo {
				if !m[v] {
					return failure("The port is not in the VLAN")
				}
				delete(m, v)
				return ""
			}
			if m[v] {
				return failure("The port is already in the VLAN")
			}
			m[v] = true
			return ""
		}}
	case t[0] == "dba-profile" && len(t) > 2 && t[1] == "add":
		return reply{run: func() string {
			id, ok := argInt(t, "profile-id")
			if !ok {
				id = 10
				for st.dba[id] != nil {
					id++
				}
			}
			if st.dba[id] != nil {
				return failure("The DBA-profile has already existed")
			}
			p := &dbaProfile{name: arg(t, "profile-name"), typ: 4}
			if p.name == "" {
				p.name = fmt.Sprintf("dba-profile_%d", id)
			}
			p.max, _ = argInt(t, "max")
			if f, ok := argInt(t, "fix"); ok {
				p.typ, p.fix = 1, f
			}
			st.dba[id] = p
			return fmt.Sprintf("  Adding a DBA profile succeeded\n  Profile ID  : %d\n  Profile name: %s\n", id, p.name)
		}}
	case t[0] == "undo" && len(t) == 4 && t[1] == "dba-profile":
		return reply{run: func() string {
			id, _ := atoi(t[3])
			if st.dba[id] == nil {
				return failure("The DBA-profile does not exist")
			}
			delete(st.dba, id)
			return ""
		}}
	case (t[0] == "ont-lineprofile" || t[0] == "ont-srvprofile") && len(t) >= 4 && t[1] == "gpon":
		id, ok := argInt(t, "profile-id")
		if !ok {
			return paramErr(col)
		}
		return reply{run: func() string {
			name := arg(t, "profile-name")
			if t[0] == "ont-lineprofile" {
				if st.lines[id] == nil {
					if name == "" {
						name = fmt.Sprintf("line-profile_%d", id)
					}
					st.lines[id] = &lineProfile{name: name, tcont: map[int]int{}, gems: map[int]int{}}
				}
				s.mode = "line"
			} else {
				if st.srvs[id] == nil {
					if name == "" {
						name = fmt.Sprintf("srv-profile_%d", id)
					}
					st.srvs[id] = &srvProfile{name: name, vlans: map[int]int{}}
				}
				s.mode = "srv"
			}
			s.profID = id
			return ""
		}}
	case t[0] == "undo" && len(t) == 5 && (t[1] == "ont-lineprofile" || t[1] == "ont-srvprofile"):
		return reply{run: func() string {
			id, _ := atoi(t[4])
			if t[1] == "ont-lineprofile" {
				if st.lines[id] == nil {
					return failure("The line profile does not exist")
				}
				for _, p := range st.ports {
					for _, x := range p.onts {
						if x.lineProfile == id {
							return failure("The profile has been bound")
						}
					}
				}
				delete(st.lines, id)
				return ""
			}
			if st.srvs[id] == nil {
				return failure("The service profile does not exist")
			}
			delete(st.srvs, id)
			return ""
		}}
	case t[0] == "traffic" && len(t) > 4 && t[1] == "table" && t[2] == "ip":
		return reply{run: func() string { return s.trafficTable(t) }}
	case t[0] == "undo" && len(t) == 6 && t[1] == "traffic":
		return reply{run: func() string {
			id, _ := atoi(t[5])
			if st.tables[id] == nil {
				return failure("The traffic table does not exist")
			}
			for _, sp := range st.sps {
				if sp.in == id || sp.out == id {
					return failure("The traffic table is being used")
				}
			}
			delete(st.tables, id)
			return ""
		}}
	case t[0] == "service-port":
		return s.servicePort(t, col)
	case t[0] == "undo" && len(t) == 3 && t[1] == "service-port":
		return reply{run: func() string {
			id, ok := atoi(t[2])
			if !ok || st.sps[id] == nil {
				return failure("No service virtual port can be operated")
			}
			delete(st.sps, id)
			delete(st.igmpUsers, id)
			for _, m := range st.mvlans {
				delete(m, id)
			}
			return ""
		}}
	case line == "btv":
		return reply{run: func() string { s.mode = "btv"; return "" }}
	case len(t) == 2 && t[0] == "multicast-vlan":
		return reply{run: func() string {
			v, _ := atoi(t[1])
			if st.vlans[v] == nil {
				return failure("The VLAN does not exist")
			}
			if st.mvlans[v] == nil {
				st.mvlans[v] = map[int]bool{}
			}
			s.mode, s.profID = "mvlan", v
			return ""
		}}
	case len(t) == 3 && t[0] == "ntp-service" && t[1] == "unicast-server":
		return reply{run: func() string { st.ntp = append(st.ntp, t[2]); return "" }}
	case len(t) == 4 && t[0] == "undo" && t[1] == "ntp-service":
		return reply{run: func() string {
			for i, x := range st.ntp {
				if x == t[3] {
					st.ntp = append(st.ntp[:i], st.ntp[i+1:]...)
					return ""
				}
			}
			return failure("The NTP server does not exist")
		}}
	}
	return unknownAt(col)
}

func (s *session) trafficTable(t []string) string {
	st := s.olt.st
	name := arg(t, "name")
	cir, ok1 := argInt(t, "cir")
	pir, ok2 := argInt(t, "pir")
	if !ok1 {
		return "  % Parameter error, the error locates at '^'\n"
	}
	if !ok2 {
		pir = cir
	}
	pri, _ := argInt(t, "priority")
	idx, explicit := argInt(t, "index")
	if explicit && st.tables[idx] != nil {
		return failure("The traffic table exists already")
	}
	for _, tt := range st.tables {
		if name != "" && tt.name == name {
			return failure("The traffic table exists already")
		}
	}
	if !explicit {
		idx = st.nextTrafficTable()
	}
	if name == "" {
		name = fmt.Sprintf("ip-traffic-table_%d", idx)
	}
	st.tables[idx] = &trafficTable{name: name, cir: cir, pir: pir, pri: pri, policy: "local-pri"}
	return fmt.Sprintf("  Create traffic descriptor record successfully\n  ------------------------------------------------\n"+
		"  TD Index             : %d\n  Traffic Table Index          : %d\n  Traffic Table Name           : %s\n"+
		"  ------------------------------------------------\n", idx, idx, name)
}

func (s *session) servicePort(t []string, col int) reply {
	st := s.olt.st
	// service-port [index] vlan V gpon F/S/P ont N gemport G multi-service user-vlan U tag-transform X ...
	idx, explicit := -1, false
	if len(t) > 1 {
		idx, explicit = atoi(t[1])
	}
	v, ok1 := argInt(t, "vlan")
	pon := arg(t, "gpon")
	ontID, ok2 := argInt(t, "ont")
	gem, ok3 := argInt(t, "gemport")
	if !ok1 || !ok2 || !ok3 || pon == "" {
		return paramErr(col + 13)
	}
	uv, ok := argInt(t, "user-vlan")
	if !ok {
		uv = v
	}
	param := "{ <cr>|bundle<K>|inbound<K>|rx-cttr<K> }:"
	if arg(t, "tag-transform") == "translate-and-add" {
		param = "{ <cr>|bundle<K>|inbound<K>|inner-priority<K>|rx-cttr<K> }:"
	}
	return reply{param: param, run: func() string {
		if st.vlans[v] == nil {
			return failure("The VLAN does not exist")
		}
		p := st.port(pon)
		if p == nil {
			return failure("The port does not exist")
		}
		o := p.onts[ontID]
		if o == nil {
			return failure("The ONT does not exist")
		}
		if lp := st.lines[o.lineProfile]; lp == nil || !hasGem(lp, gem) {
			return failure("The GEM port does not exist")
		}
		if explicit && st.sps[idx] != nil {
			return failure("The service virtual port has existed already")
		}
		for _, sp := range st.sps {
			if sp.pon == pon && sp.ont == ontID && sp.gem == gem && sp.userVLAN == uv {
				return failure("Service virtual port has existed already")
			}
		}
		in, out := 6, 6
		if i := indexOf(t, "inbound"); i > 0 {
			in, _ = atoi(arg(t[i:], "index"))
		}
		if i := indexOf(t, "outbound"); i > 0 {
			out, _ = atoi(arg(t[i:], "index"))
		}
		if st.tables[in] == nil || st.tables[out] == nil {
			return failure("The traffic table does not exist")
		}
		if !explicit {
			idx = st.nextServicePort()
		}
		inner, _ := argInt(t, "inner-vlan")
		st.sps[idx] = &servicePort{vlan: v, pon: pon, ont: ontID, gem: gem, userVLAN: uv,
			transform: arg(t, "tag-transform"), inner: inner, in: in, out: out}
		return ""
	}}
}

func indexOf(t []string, w string) int {
	for i, x := range t {
		if x == w {
			return i
		}
	}
	return 0
}

func (s *session) lineProfile(t []string, col int) reply {
	lp := s.olt.st.lines[s.profID]
	switch {
	case len(t) == 4 && t[0] == "tcont" && t[2] == "dba-profile-id":
		return reply{run: func() string {
			tc, _ := atoi(t[1])
			d, _ := atoi(t[3])
			if s.olt.st.dba[d] == nil {
				return failure("The DBA-profile does not exist")
			}
			lp.tcont[tc] = d
			return ""
		}}
	case len(t) >= 5 && t[0] == "gem" && t[1] == "add":
		return reply{run: func() string {
			g, _ := atoi(t[2])
			if _, ok := lp.gems[g]; ok {
				return failure("The GEM index has already existed")
			}
			lp.gems[g] = -1
			return ""
		}}
	case len(t) == 6 && t[0] == "gem" && t[1] == "mapping":
		return reply{run: func() string {
			g, _ := atoi(t[2])
			v, _ := atoi(t[5])
			if _, ok := lp.gems[g]; !ok {
				return failure("The GEM port does not exist")
			}
			lp.gems[g] = v
			return ""
		}}
	case len(t) == 1 && t[0] == "commit":
		return text("")
	}
	return unknownAt(col)
}

func (s *session) srvProfile(t []string, col int) reply {
	sp := s.olt.st.srvs[s.profID]
	switch {
	case len(t) >= 3 && t[0] == "ont-port" && t[1] == "eth":
		return reply{run: func() string { sp.ethPorts, _ = atoi(t[2]); return "" }}
	case len(t) >= 4 && t[0] == "port" && t[1] == "vlan" && t[2] == "eth":
		return reply{run: func() string {
			e, _ := atoi(t[3])
			v, _ := argInt(t, "translation")
			sp.vlans[e] = v
			return ""
		}}
	case len(t) == 1 && t[0] == "commit":
		return text("")
	}
	return unknownAt(col)
}

func hasGem(lp *lineProfile, gem int) bool {
	_, ok := lp.gems[gem]
	return ok
}
