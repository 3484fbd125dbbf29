package huawei

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei/parse"
)

var snRe = regexp.MustCompile(`^[0-9A-Fa-f]{16}$`)

func argErr(op, format string, a ...any) error {
	return &driver.Error{Op: op, Err: &driver.ArgError{Reason: fmt.Sprintf(format, a...)}}
}

func validVLAN(v int) bool { return v >= 1 && v <= 4094 }

// vlanGuard applies the shared-OLT rule for VLAN operations: on a shared
// OLT only this router's S-VLAN may be touched unless force.
func (d *Driver) vlanGuard(vlan int, force bool) error {
	if !d.shared() || force || (d.cfg.SVLAN != 0 && vlan == d.cfg.SVLAN) {
		return nil
	}
	return &driver.GuardError{Reason: fmt.Sprintf("VLAN %d is not this router's S-VLAN", vlan), Overridable: true}
}

// ontGuard reads an ONT's service-ports and applies the shared-OLT rules:
// service-ports on another S-VLAN refuse always; an ONT with none at all
// refuses unless force. It returns the service-ports.
func (c *call) ontGuard(ctx context.Context, p pon, id int, force bool, expect int) ([]driver.ServicePort, error) {
	sps, err := c.servicePorts(ctx, fmt.Sprintf("display service-port port %s ont %d", p, id))
	if err != nil {
		return nil, err
	}
	d := c.d
	if !d.shared() {
		return sps, nil
	}
	for _, sp := range sps {
		if sp.VLAN != d.cfg.SVLAN && (expect == 0 || sp.VLAN != expect) {
			return nil, &driver.GuardError{Reason: fmt.Sprintf("ONT %s %d has service-port %d on S-VLAN %d, not this router's",
				p, id, sp.Index, sp.VLAN)}
		}
	}
	if len(sps) == 0 && !force {
		return nil, &driver.GuardError{Reason: fmt.Sprintf("ONT %s %d has no service-port of this router", p, id), Overridable: true}
	}
	return sps, nil
}

// trafficTable returns the index of an IP traffic table limiting to kbps
// (CIR = PIR), creating one named with the router's prefix when none
// exists. Known indexes are cached per driver.
func (c *call) trafficTable(ctx context.Context, kbps int, tables *[]driver.TrafficTable) (string, error) {
	key := fmt.Sprintf("tt:%d", kbps)
	if i, ok := c.d.cached(key); ok {
		return fmt.Sprint(i), nil
	}
	if *tables == nil {
		t, err := c.trafficTables(ctx)
		if err != nil {
			return "", err
		}
		*tables = t
	}
	for _, t := range *tables {
		if t.CIR == kbps && t.PIR == kbps {
			c.d.remember(key, t.Index)
			return fmt.Sprint(t.Index), nil
		}
	}
	name := fmt.Sprintf("%s_%dk", c.d.cfg.Prefix, kbps)
	out, err := c.write(ctx, fmt.Sprintf(`traffic table ip name "%s" cir %d pir %d priority 0 priority-policy local-setting`, name, kbps, kbps))
	if err != nil {
		return "", err
	}
	if c.dry {
		return "<" + name + ">", nil
	}
	idx, _, ok := parse.TrafficTableCreated(out)
	if !ok {
		return "", fmt.Errorf("no traffic table index in the answer to creating %s", name)
	}
	*tables = append(*tables, driver.TrafficTable{Index: idx, Name: name, CIR: kbps, PIR: kbps})
	c.d.remember(key, idx)
	return fmt.Sprint(idx), nil
}

func (d *Driver) withHeadroom(kbps int) int { return int(math.Round(float64(kbps) * d.cfg.Headroom)) }

// ensureProfiles makes the line and service profiles an ont-add needs when
// the OLT lacks them: a line profile with one T-CONT on a type-4 DBA
// profile and the GEM port mapped to the user VLAN, and a service profile
// with ethPorts Ethernet ports translating the user VLAN.
func (c *call) ensureProfiles(ctx context.Context, line, srv, gem, userVLAN, ethPorts int) error {
	pfx := c.d.cfg.Prefix
	if _, ok := c.d.cached(fmt.Sprintf("line:%d", line)); !ok {
		_, err := c.read(ctx, fmt.Sprintf("display ont-lineprofile gpon profile-id %d", line))
		switch {
		case absent(err):
			dba, err := c.dbaProfile(ctx)
			if err != nil {
				return err
			}
			for _, cmd := range []string{
				fmt.Sprintf(`ont-lineprofile gpon profile-id %d profile-name "%s_line_%d"`, line, pfx, line),
				fmt.Sprintf("tcont 1 dba-profile-id %s", dba),
				fmt.Sprintf("gem add %d eth tcont 1", gem),
				fmt.Sprintf("gem mapping %d 0 vlan %d", gem, userVLAN),
				"commit", "quit",
			} {
				if _, err := c.write(ctx, cmd); err != nil {
					return err
				}
			}
		case err != nil:
			return err
		}
		if !c.dry {
			c.d.remember(fmt.Sprintf("line:%d", line), line)
		}
	}
	if _, ok := c.d.cached(fmt.Sprintf("srv:%d", srv)); !ok {
		_, err := c.read(ctx, fmt.Sprintf("display ont-srvprofile gpon profile-id %d", srv))
		switch {
		case absent(err):
			cmds := []string{fmt.Sprintf(`ont-srvprofile gpon profile-id %d profile-name "%s_srv_%d"`, srv, pfx, srv),
				fmt.Sprintf("ont-port eth %d", ethPorts)}
			for e := 1; e <= ethPorts; e++ {
				cmds = append(cmds, fmt.Sprintf("port vlan eth %d translation %d user-vlan %d", e, userVLAN, userVLAN))
			}
			for _, cmd := range append(cmds, "commit", "quit") {
				if _, err := c.write(ctx, cmd); err != nil {
					return err
				}
			}
		case err != nil:
			return err
		}
		if !c.dry {
			c.d.remember(fmt.Sprintf("srv:%d", srv), srv)
		}
	}
	return nil
}

// dbaProfile finds (or makes) the router's type-4 DBA profile of 1 Gbit/s
// that its line profiles bind; rate limiting is done by traffic tables.
func (c *call) dbaProfile(ctx context.Context) (string, error) {
	out, err := c.read(ctx, "display dba-profile all")
	if err != nil {
		return "", err
	}
	used := map[int]bool{}
	for _, p := range parse.ParseDBAProfiles(out) {
		if p.Type == 4 && p.Max == 1024000 {
			return fmt.Sprint(p.ID), nil
		}
		used[p.ID] = true
	}
	id := 10
	for used[id] {
		id++
	}
	if _, err := c.write(ctx, fmt.Sprintf(`dba-profile add profile-id %d profile-name "%s_dba" type4 max 1024000`, id, c.d.cfg.Prefix)); err != nil {
		return "", err
	}
	return fmt.Sprint(id), nil
}

// servicePortCmd builds the service-port of an ONT: with an outer S-VLAN
// the user VLAN is translated to the inner VLAN and the S-VLAN added on
// top (QinQ); without one the user VLAN is translated to vlan.
func servicePortCmd(index string, svlan, vlan int, p pon, id string, gem, userVLAN int, up, down string) string {
	cmd := "service-port "
	if index != "" {
		cmd += index + " "
	}
	if svlan != 0 && svlan != vlan {
		cmd += fmt.Sprintf("vlan %d gpon %s ont %s gemport %d multi-service user-vlan %d tag-transform translate-and-add inner-vlan %d",
			svlan, p, id, gem, userVLAN, vlan)
	} else {
		cmd += fmt.Sprintf("vlan %d gpon %s ont %s gemport %d multi-service user-vlan %d tag-transform translate", vlan, p, id, gem, userVLAN)
	}
	if up != "" {
		cmd += fmt.Sprintf(" inbound traffic-table index %s outbound traffic-table index %s", up, down)
	}
	return cmd
}

// ONTAdd implements driver.Driver.
func (d *Driver) ONTAdd(ctx context.Context, a driver.ONTAddArgs) (*driver.ONTAddResult, error) {
	const op = "ont-add"
	p, err := parsePON(a.Port)
	if err != nil {
		return nil, &driver.Error{Op: op, Err: err}
	}
	if !snRe.MatchString(a.SN) {
		return nil, argErr(op, "sn must be 16 hex digits")
	}
	if !validVLAN(a.VLAN) {
		return nil, argErr(op, "vlan must be 1-4094")
	}
	uv := cmpOr(a.UserVLAN, a.VLAN)
	svlan := cmpOr(a.SVLAN, d.cfg.SVLAN)
	if a.SVLAN != 0 && d.shared() && a.SVLAN != d.cfg.SVLAN && !a.Force {
		return nil, &driver.Error{Op: op, Err: &driver.GuardError{Reason: fmt.Sprintf("S-VLAN %d is not this router's", a.SVLAN), Overridable: true}}
	}
	line := cmpOr(a.LineProfile, a.ProfileID, a.VLAN)
	srv := cmpOr(a.SrvProfile, a.ProfileID, a.VLAN)
	eth, gem := cmpOr(a.ETHPorts, 1), cmpOr(a.Gemport, 1)
	down, up := a.DownKbps, a.UpKbps
	if a.Plan != nil {
		down, up = d.withHeadroom(a.Plan.DownKbps), d.withHeadroom(a.Plan.UpKbps)
	}
	iptv := 0
	if a.IPTV {
		iptv = cmpOr(a.IPTVVLAN, d.cfg.IPTVVLAN)
		if !validVLAN(iptv) {
			return nil, argErr(op, "iptv needs iptv_vlan or a registered OLT's IPTV VLAN")
		}
	}
	sn := strings.ToUpper(a.SN)
	r := &driver.ONTAddResult{Port: p.String(), SN: sn, VLAN: cmpOr(svlan, a.VLAN), UserVLAN: uv}
	if svlan != 0 && svlan != a.VLAN {
		r.CVLAN = a.VLAN
	}
	err = d.do(ctx, op, a.Options, func(ctx context.Context, c *call) (err error) {
		var tables []driver.TrafficTable
		upIdx, downIdx := "", ""
		if down > 0 && up > 0 {
			var err error
			if upIdx, err = c.trafficTable(ctx, up, &tables); err != nil {
				return err
			}
			if downIdx, err = c.trafficTable(ctx, down, &tables); err != nil {
				return err
			}
		}
		if err := c.ensureProfiles(ctx, line, srv, gem, uv, eth); err != nil {
			return err
		}
		if _, err := c.write(ctx, "interface gpon "+p.board()); err != nil {
			return err
		}
		add := fmt.Sprintf(`ont add %d sn-auth "%s" omci ont-lineprofile-id %d ont-srvprofile-id %d`, p.p, sn, line, srv)
		if a.Description != "" {
			add += fmt.Sprintf(` desc "%s"`, a.Description)
		}
		out, err := c.write(ctx, add)
		if err != nil {
			return err
		}
		id := "<ont-id>"
		if !c.dry {
			added, ok := parse.ParseONTAdded(out)
			if !ok {
				return fmt.Errorf("no ONT id in the answer to ont add")
			}
			r.ONTID = added.ONTID
			id = fmt.Sprint(added.ONTID)
			defer func() {
				if err != nil {
					c.rollbackONT(ctx, p, added.ONTID)
				}
			}()
		}
		for e := 1; e <= eth; e++ {
			if _, err := c.write(ctx, fmt.Sprintf("ont port native-vlan %d %s eth %d vlan %d priority 0", p.p, id, e, uv)); err != nil {
				return err
			}
		}
		if _, err := c.write(ctx, "quit"); err != nil {
			return err
		}
		if _, err := c.write(ctx, servicePortCmd("", svlan, a.VLAN, p, id, gem, uv, upIdx, downIdx)); err != nil {
			return err
		}
		if iptv != 0 {
			if err := c.addIPTV(ctx, p, id, gem, iptv); err != nil {
				return err
			}
		}
		r.WriteResult = c.result()
		return nil
	})
	return r, err
}

// addIPTV gives an ONT the IPTV VLAN: a service-port on it, that
// service-port made an IGMP user in BTV mode and a member of the
// multicast VLAN, so the ONT can join the channels.
func (c *call) addIPTV(ctx context.Context, p pon, id string, gem, iptv int) error {
	if _, err := c.write(ctx, servicePortCmd("", 0, iptv, p, id, gem, iptv, "", "")); err != nil {
		return err
	}
	idx := "<iptv-service-port>"
	if !c.dry {
		sps, err := c.servicePorts(ctx, fmt.Sprintf("display service-port port %s ont %s", p, id))
		if err != nil {
			return err
		}
		idx = ""
		for _, sp := range sps {
			if sp.VLAN == iptv {
				idx = fmt.Sprint(sp.Index)
			}
		}
		if idx == "" {
			return fmt.Errorf("the IPTV service-port of ONT %s %s is not listed", p, id)
		}
	}
	return c.writeAll(ctx, "btv", "igmp user add service-port "+idx+" no-auth", "quit",
		fmt.Sprintf("multicast-vlan %d", iptv), "igmp multicast-vlan member service-port "+idx, "quit")
}

// rollbackONT removes an ONT whose provisioning failed half-way (its
// service-ports first), so a failed ont-add leaves nothing behind. It is
// best effort: the original error is what the caller gets.
func (c *call) rollbackONT(ctx context.Context, p pon, id int) {
	for i := 0; i < 3 && strings.HasPrefix(c.s.mode(), "config-"); i++ {
		if _, err := c.s.exec(ctx, "quit"); err != nil {
			return
		}
	}
	sps, err := c.servicePorts(ctx, fmt.Sprintf("display service-port port %s ont %d", p, id))
	if err != nil {
		return
	}
	for _, sp := range sps {
		c.s.exec(ctx, fmt.Sprintf("undo service-port %d", sp.Index))
	}
	if _, err := c.s.exec(ctx, "interface gpon "+p.board()); err != nil {
		return
	}
	c.s.exec(ctx, fmt.Sprintf("ont delete %d %d", p.p, id))
	c.s.exec(ctx, "quit")
}

func cmpOr(v ...int) int {
	i := slices.IndexFunc(v, func(x int) bool { return x != 0 })
	if i < 0 {
		return 0
	}
	return v[i]
}
