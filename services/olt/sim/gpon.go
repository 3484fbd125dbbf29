package sim

import (
	"fmt"
	"strings"
)

// gpon answers the commands of `interface gpon F/S` mode.
func (s *session) gpon(t []string, col int) reply {
	o := s.olt
	st := o.st
	port := func(p string) string { return s.iface + "/" + p }
	switch {
	case len(t) == 3 && t[0] == "port" && t[2] == "ont-auto-find" || len(t) == 4 && t[0] == "port" && t[2] == "ont-auto-find":
		return reply{run: func() string {
			p := st.port(port(t[1]))
			if p == nil {
				return failure("The port does not exist")
			}
			on := len(t) == 3 || t[3] == "enable"
			if p.autofindOn == on {
				return failure("Make configuration repeatedly")
			}
			p.autofindOn = on
			return ""
		}}
	case len(t) >= 4 && t[0] == "ont" && t[1] == "add":
		return s.ontAdd(t, col)
	case len(t) == 4 && t[0] == "ont" && (t[1] == "delete" || t[1] == "reset" || t[1] == "activate" || t[1] == "deactivate"):
		p := st.port(port(t[2]))
		id, _ := atoi(t[3])
		find := func() *ont {
			if p == nil {
				return nil
			}
			return p.onts[id]
		}
		var r reply
		switch t[1] {
		case "delete":
			r.run = func() string {
				if find() == nil {
					return failure("The ONT does not exist")
				}
				if len(st.servicePortsOf(port(t[2]), id)) > 0 {
					return "  Failure: This configured object has some service virtual\n  ports\n"
				}
				delete(p.onts, id)
				return "  Number of ONTs that can be deleted: 1, success: 1\n"
			}
		case "reset":
			r.confirm = "  Are you sure to reset the ONT(s)? (y/n)[n]:"
			r.run = func() string {
				x := find()
				if x == nil {
					return failure("The ONT does not exist")
				}
				if r, _, _ := x.states(); r != "online" {
					return failure("The ONT is not online")
				}
				return ""
			}
		default:
			r.run = func() string {
				x := find()
				if x == nil {
					return failure("The ONT does not exist")
				}
				x.active = t[1] == "activate"
				return ""
			}
		}
		return r
	case len(t) >= 5 && t[0] == "ont" && t[1] == "modify" && t[4] == "desc":
		return reply{run: func() string {
			p := st.port(port(t[2]))
			id, _ := atoi(t[3])
			if p == nil || p.onts[id] == nil {
				return failure("The ONT does not exist")
			}
			if len(t) > 5 {
				p.onts[id].desc = t[5]
			} else {
				p.onts[id].desc = ""
			}
			return ""
		}}
	case len(t) >= 9 && t[0] == "ont" && t[1] == "port" && t[2] == "native-vlan":
		return reply{run: func() string {
			p := st.port(port(t[3]))
			id, _ := atoi(t[4])
			e, _ := atoi(t[6])
			v, _ := argInt(t, "vlan")
			if p == nil || p.onts[id] == nil {
				return failure("The ONT does not exist")
			}
			if sp := st.srvs[p.onts[id].srvProfile]; sp == nil || e > sp.ethPorts {
				return failure("The ONT port does not exist")
			}
			p.onts[id].natives[e] = v
			return ""
		}}
	}
	return unknownAt(col)
}

// ontAdd registers an ONT: `ont add P [ID] sn-auth "SN" omci
// ont-lineprofile-id L ont-srvprofile-id S [desc "D"]`.
func (s *session) ontAdd(t []string, col int) reply {
	o := s.olt
	st := o.st
	pnum := t[2]
	idArg, explicit := -1, false
	if n, ok := atoi(t[3]); ok {
		idArg, explicit = n, true
	}
	sn := strings.ToUpper(arg(t, "sn-auth"))
	lp, ok1 := argInt(t, "ont-lineprofile-id")
	sp, ok2 := argInt(t, "ont-srvprofile-id")
	if len(sn) != 16 || !ok1 || !ok2 {
		return paramErr(col + 8)
	}
	param := "{ <cr>|ont-type<K> }:"
	if !explicit {
		param = "{ <cr>|ontid<U><0,255> }:"
	}
	model := o.model
	if model == MA5608T {
		// The MA5608T capture answers at once, without a parameter prompt.
		param = ""
	}
	return reply{param: param, run: func() string {
		port := s.iface + "/" + pnum
		p := st.port(port)
		if p == nil {
			return failure("The port does not exist")
		}
		if st.lines[lp] == nil {
			return failure("The ont-lineprofile does not exist")
		}
		if st.srvs[sp] == nil {
			return failure("The ont-srvprofile does not exist")
		}
		if _, x := st.ontBySN(sn); x != nil {
			return failure("SN already exists")
		}
		id := idArg
		if !explicit {
			used := map[int]bool{}
			for k := range p.onts {
				used[k] = true
			}
			id = st.nextFree(used, 0, 255)
			if id < 0 {
				return failure("The number of ONTs on the port has reached the upper limit")
			}
		} else if p.onts[id] != nil {
			return failure("The ONT ID has already existed")
		}
		online := false
		for i, a := range st.autofind {
			if a.SN == sn && a.Port == port {
				online = true
				st.autofind = append(st.autofind[:i], st.autofind[i+1:]...)
				break
			}
		}
		p.onts[id] = &ont{id: id, sn: sn, lineProfile: lp, srvProfile: sp, desc: arg(t, "desc"), active: true,
			online: online, natives: map[int]int{}, added: o.now()}
		if online && o.alarms {
			o.pending = append(o.pending, o.alarmText("The ONT goes online",
				fmt.Sprintf("FrameID: 0, SlotID: %s, PortID: %s, ONT ID: %d", strings.Split(s.iface, "/")[1], pnum, id)))
		}
		f, sl, pn, _ := splitFSP(port)
		_ = f
		_ = sl
		if model == MA5683T {
			return fmt.Sprintf("  ONTID :%d\n", id)
		}
		return fmt.Sprintf("  Number of ONTs that can be added: 1, success: 1\n  PortID :%d, ONTID :%d\n", pn, id)
	}}
}
