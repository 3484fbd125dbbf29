package huawei

import (
	"context"
	"fmt"
	"strings"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei/parse"
)

// uplinkArg turns "0/3/0" into the `F/S P` the port vlan command wants.
func uplinkArg(port string) (string, error) {
	p, err := parsePON(port)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %d", p.board(), p.p), nil
}

func (c *call) writeAll(ctx context.Context, cmds ...string) error {
	for _, cmd := range cmds {
		if _, err := c.write(ctx, cmd); err != nil {
			return err
		}
	}
	return nil
}

// VLANAdd implements driver.Driver.
func (d *Driver) VLANAdd(ctx context.Context, a driver.VLANAddArgs) (*driver.VLANResult, error) {
	const op = "vlan-add"
	if !validVLAN(a.VLAN) {
		return nil, argErr(op, "vlan must be 1-4094")
	}
	typ := cmpStr(a.Type, "smart")
	if !map[string]bool{"smart": true, "standard": true, "mux": true, "super": true}[typ] {
		return nil, argErr(op, "type must be smart, standard, mux or super")
	}
	attr := map[string]string{"": "", "common": "", "stacking": "stacking", "qinq": "q-in-q"}
	at, ok := attr[a.Attribute]
	if !ok {
		return nil, argErr(op, "attribute must be common, stacking or qinq")
	}
	if err := d.vlanGuard(a.VLAN, a.Force); err != nil {
		return nil, &driver.Error{Op: op, Err: err}
	}
	r := &driver.VLANResult{VLAN: a.VLAN, Uplinks: []string{}}
	err := d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		desc := cmpStr(a.Description, fmt.Sprintf("%s_vlan_%d", d.cfg.Prefix, a.VLAN))
		cmds := []string{fmt.Sprintf("vlan %d %s", a.VLAN, typ)}
		if at != "" {
			cmds = append(cmds, fmt.Sprintf("vlan attrib %d %s", a.VLAN, at))
		}
		cmds = append(cmds, fmt.Sprintf(`vlan desc %d description "%s"`, a.VLAN, desc))
		for _, u := range a.Uplinks {
			arg, err := uplinkArg(u)
			if err != nil {
				return err
			}
			cmds = append(cmds, fmt.Sprintf("port vlan %d %s", a.VLAN, arg))
			r.Uplinks = append(r.Uplinks, u)
		}
		err := c.writeAll(ctx, cmds...)
		r.WriteResult = c.result()
		return err
	})
	return r, err
}

// VLANDel implements driver.Driver: untag from the uplinks, then delete.
func (d *Driver) VLANDel(ctx context.Context, a driver.VLANDelArgs) (*driver.VLANResult, error) {
	const op = "vlan-del"
	if !validVLAN(a.VLAN) {
		return nil, argErr(op, "vlan must be 1-4094")
	}
	if err := d.vlanGuard(a.VLAN, a.Force); err != nil {
		return nil, &driver.Error{Op: op, Err: err}
	}
	r := &driver.VLANResult{VLAN: a.VLAN, Uplinks: []string{}}
	err := d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		var cmds []string
		for _, u := range a.Uplinks {
			arg, err := uplinkArg(u)
			if err != nil {
				return err
			}
			cmds = append(cmds, fmt.Sprintf("undo port vlan %d %s", a.VLAN, arg))
			r.Uplinks = append(r.Uplinks, u)
		}
		err := c.writeAll(ctx, append(cmds, fmt.Sprintf("undo vlan %d", a.VLAN))...)
		r.WriteResult = c.result()
		return err
	})
	return r, err
}

// PortVLAN implements driver.Driver.
func (d *Driver) PortVLAN(ctx context.Context, a driver.PortVLANArgs) (*driver.PortVLANResult, error) {
	const op = "port-vlan"
	if !validVLAN(a.VLAN) {
		return nil, argErr(op, "vlan must be 1-4094")
	}
	arg, err := uplinkArg(a.Port)
	if err != nil {
		return nil, &driver.Error{Op: op, Err: err}
	}
	if err := d.vlanGuard(a.VLAN, a.Force); err != nil {
		return nil, &driver.Error{Op: op, Err: err}
	}
	r := &driver.PortVLANResult{VLAN: a.VLAN, Port: a.Port, Tagged: !a.Remove}
	err = d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		cmd := fmt.Sprintf("port vlan %d %s", a.VLAN, arg)
		if a.Remove {
			cmd = "undo " + cmd
		}
		_, err := c.write(ctx, cmd)
		r.WriteResult = c.result()
		return err
	})
	return r, err
}

// ProfileAdd implements driver.Driver; see the README for its arguments.
func (d *Driver) ProfileAdd(ctx context.Context, a driver.ProfileArgs) (*driver.ProfileResult, error) {
	const op = "profile-add"
	r := &driver.ProfileResult{Kind: a.Kind}
	if a.ID != nil {
		r.ID = *a.ID
	}
	if a.Kind != "traffic" && a.ID == nil {
		return nil, argErr(op, "id is required for a %s profile", a.Kind)
	}
	r.Name = cmpStr(a.Name, fmt.Sprintf("%s_%s_%d", d.cfg.Prefix, a.Kind, r.ID))
	var cmds []string
	switch a.Kind {
	case "dba":
		cmds = []string{fmt.Sprintf(`dba-profile add profile-id %d profile-name "%s" type4 max %d`, r.ID, r.Name, cmpOr(a.Kbps, 1024000))}
	case "line":
		if a.DBAProfileID == 0 || !validVLAN(a.VLAN) {
			return nil, argErr(op, "a line profile needs dba_profile_id and vlan")
		}
		g := cmpOr(a.Gemport, 1)
		cmds = []string{fmt.Sprintf(`ont-lineprofile gpon profile-id %d profile-name "%s"`, r.ID, r.Name),
			fmt.Sprintf("tcont 1 dba-profile-id %d", a.DBAProfileID), fmt.Sprintf("gem add %d eth tcont 1", g),
			fmt.Sprintf("gem mapping %d 0 vlan %d", g, a.VLAN), "commit", "quit"}
	case "service":
		if !validVLAN(a.VLAN) {
			return nil, argErr(op, "a service profile needs vlan")
		}
		eth := cmpOr(a.ETHPorts, 1)
		cmds = []string{fmt.Sprintf(`ont-srvprofile gpon profile-id %d profile-name "%s"`, r.ID, r.Name), fmt.Sprintf("ont-port eth %d", eth)}
		for e := 1; e <= eth; e++ {
			cmds = append(cmds, fmt.Sprintf("port vlan eth %d translation %d user-vlan %d", e, a.VLAN, a.VLAN))
		}
		cmds = append(cmds, "commit", "quit")
	case "traffic":
		if a.Kbps <= 0 {
			return nil, argErr(op, "a traffic table needs kbps")
		}
		r.Name = cmpStr(a.Name, fmt.Sprintf("%s_%dk", d.cfg.Prefix, a.Kbps))
		cmds = []string{fmt.Sprintf(`traffic table ip name "%s" cir %d pir %d priority 0 priority-policy local-setting`, r.Name, a.Kbps, a.Kbps)}
	default:
		return nil, argErr(op, "kind must be dba, line, service or traffic")
	}
	err := d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		for _, cmd := range cmds {
			out, err := c.write(ctx, cmd)
			if err != nil {
				return err
			}
			if i, _, ok := parse.TrafficTableCreated(out); ok {
				r.ID = i
			}
		}
		r.WriteResult = c.result()
		return nil
	})
	return r, err
}

// ProfileDel implements driver.Driver. On a shared OLT a line or service
// profile not named with the router's prefix is refused unless force.
func (d *Driver) ProfileDel(ctx context.Context, a driver.ProfileArgs) (*driver.ProfileResult, error) {
	const op = "profile-del"
	if a.ID == nil {
		return nil, argErr(op, "id is required")
	}
	r := &driver.ProfileResult{Kind: a.Kind, ID: *a.ID}
	var cmd, list string
	switch a.Kind {
	case "dba":
		cmd = fmt.Sprintf("undo dba-profile profile-id %d", r.ID)
	case "line":
		cmd, list = fmt.Sprintf("undo ont-lineprofile gpon profile-id %d", r.ID), "display ont-lineprofile gpon all"
	case "service":
		cmd, list = fmt.Sprintf("undo ont-srvprofile gpon profile-id %d", r.ID), "display ont-srvprofile gpon all"
	case "traffic":
		cmd = fmt.Sprintf("undo traffic table ip index %d", r.ID)
	default:
		return nil, argErr(op, "kind must be dba, line, service or traffic")
	}
	err := d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		if list != "" && d.shared() && !a.Force {
			out, err := c.read(ctx, list)
			if err != nil {
				return err
			}
			for _, p := range parse.ParseProfiles(out) {
				if p.ID == r.ID {
					r.Name = p.Name
					if !strings.HasPrefix(p.Name, d.cfg.Prefix) {
						return &driver.GuardError{Reason: fmt.Sprintf("profile %q is not named with this router's prefix %q", p.Name, d.cfg.Prefix), Overridable: true}
					}
				}
			}
		}
		_, err := c.write(ctx, cmd)
		d.resetCache()
		r.WriteResult = c.result()
		return err
	})
	return r, err
}

// Exec implements driver.Driver: arbitrary commands in config mode,
// refused on a shared OLT unless force.
func (d *Driver) Exec(ctx context.Context, a driver.ExecArgs) (*driver.ExecResult, error) {
	const op = "exec"
	if len(a.Commands) == 0 {
		return nil, argErr(op, "commands is required")
	}
	if d.shared() && !a.Force {
		return nil, &driver.Error{Op: op, Err: &driver.GuardError{Reason: "exec on a shared OLT", Overridable: true}}
	}
	r := &driver.ExecResult{Outputs: []driver.RunResult{}}
	err := d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		defer func() { r.WriteResult = c.result() }()
		for _, cmd := range a.Commands {
			if strings.ContainsAny(cmd, "\r\n") {
				return &driver.ArgError{Reason: "one command per entry"}
			}
			out, err := c.write(ctx, strings.TrimSpace(cmd))
			r.Outputs = append(r.Outputs, driver.RunResult{Command: cmd, Output: out})
			if err != nil {
				return err
			}
		}
		d.resetCache()
		return nil
	})
	return r, err
}

// NTP implements driver.Driver.
func (d *Driver) NTP(ctx context.Context, a driver.NTPArgs) (*driver.WriteResult, error) {
	if len(a.Servers) == 0 {
		return nil, argErr("ntp", "servers is required")
	}
	var r driver.WriteResult
	err := d.do(ctx, "ntp", a.Options, func(ctx context.Context, c *call) error {
		for _, s := range a.Servers {
			cmd := "ntp-service unicast-server " + s
			if a.Remove {
				cmd = "undo " + cmd
			}
			if _, err := c.write(ctx, cmd); err != nil {
				return err
			}
		}
		r = c.result()
		return nil
	})
	return &r, err
}

// Sysname implements driver.Driver.
func (d *Driver) Sysname(ctx context.Context, a driver.SysnameArgs) (*driver.WriteResult, error) {
	if a.Name == "" || strings.ContainsAny(a.Name, " \"\r\n()#>") {
		return nil, argErr("sysname", "name must be one word without quotes, parentheses, # or >")
	}
	var r driver.WriteResult
	err := d.do(ctx, "sysname", a.Options, func(ctx context.Context, c *call) error {
		_, err := c.write(ctx, "sysname "+a.Name)
		r = c.result()
		return err
	})
	return &r, err
}

// Save implements driver.Driver: `save`, whose parameter prompt the
// session answers.
func (d *Driver) Save(ctx context.Context, o driver.Options) (*driver.WriteResult, error) {
	var r driver.WriteResult
	err := d.do(ctx, "save", o, func(ctx context.Context, c *call) error {
		_, err := c.write(ctx, "save")
		r = c.result()
		return err
	})
	return &r, err
}

// PlanSync implements driver.Driver: every plan gets a down and an up
// traffic table at its rate times the headroom, reusing tables of the
// same rate.
func (d *Driver) PlanSync(ctx context.Context, a driver.PlanSyncArgs) (*driver.PlanSyncResult, error) {
	r := &driver.PlanSyncResult{Plans: []driver.PlanTables{}}
	err := d.do(ctx, "plan-sync", a.Options, func(ctx context.Context, c *call) error {
		var tables []driver.TrafficTable
		for _, p := range a.Plans {
			if p.DownKbps <= 0 || p.UpKbps <= 0 {
				return &driver.ArgError{Reason: fmt.Sprintf("plan %q needs down_kbps and up_kbps", p.Name)}
			}
			before := len(c.cmds)
			down, err := c.trafficTable(ctx, d.withHeadroom(p.DownKbps), &tables)
			if err != nil {
				return err
			}
			up, err := c.trafficTable(ctx, d.withHeadroom(p.UpKbps), &tables)
			if err != nil {
				return err
			}
			pt := driver.PlanTables{Plan: p.Name, Created: len(c.cmds) - before, DownIndex: -1, UpIndex: -1}
			fmt.Sscan(down, &pt.DownIndex)
			fmt.Sscan(up, &pt.UpIndex)
			r.Plans = append(r.Plans, pt)
		}
		r.WriteResult = c.result()
		return nil
	})
	return r, err
}

// Init implements driver.Driver: the S-VLAN as a stacking VLAN tagged on
// the uplinks, and ONT autofind on every PON port. What already exists is
// left alone, so init can be run again.
func (d *Driver) Init(ctx context.Context, a driver.InitArgs) (*driver.WriteResult, error) {
	svlan := cmpOr(a.SVLAN, d.cfg.SVLAN)
	if svlan != 0 && !validVLAN(svlan) {
		return nil, argErr("init", "svlan must be 1-4094")
	}
	var r driver.WriteResult
	err := d.do(ctx, "init", a.Options, func(ctx context.Context, c *call) error {
		if svlan != 0 {
			out, err := c.read(ctx, "display vlan all")
			if err != nil {
				return err
			}
			exists := false
			for _, v := range parse.ParseVLANs(out) {
				exists = exists || v.ID == svlan
			}
			if !exists {
				if err := c.writeAll(ctx, fmt.Sprintf("vlan %d smart", svlan), fmt.Sprintf("vlan attrib %d stacking", svlan),
					fmt.Sprintf(`vlan desc %d description "%s_svlan"`, svlan, d.cfg.Prefix)); err != nil {
					return err
				}
			}
			ups, err := c.uplinks(ctx)
			if err != nil {
				return err
			}
			for _, u := range a.Uplinks {
				tagged := false
				for _, v := range ups[u].VLANs {
					tagged = tagged || v == svlan
				}
				if tagged {
					continue
				}
				arg, err := uplinkArg(u)
				if err != nil {
					return err
				}
				if _, err := c.write(ctx, fmt.Sprintf("port vlan %d %s", svlan, arg)); err != nil {
					return err
				}
			}
		}
		ports, err := c.ponPorts(ctx, "")
		if err != nil {
			return err
		}
		gp, err := c.section(ctx, "gpon")
		if err != nil {
			return err
		}
		on := map[string]bool{}
		for _, p := range gp.AutofindPorts {
			on[p] = true
		}
		board := ""
		for _, pp := range ports {
			if on[pp.Port] {
				continue
			}
			p, _ := parsePON(pp.Port)
			if p.board() != board {
				if board != "" {
					if _, err := c.write(ctx, "quit"); err != nil {
						return err
					}
				}
				board = p.board()
				if _, err := c.write(ctx, "interface gpon "+board); err != nil {
					return err
				}
			}
			if _, err := c.write(ctx, fmt.Sprintf("port %d ont-auto-find enable", p.p)); err != nil {
				return err
			}
		}
		if board != "" {
			if _, err := c.write(ctx, "quit"); err != nil {
				return err
			}
		}
		r = c.result()
		return nil
	})
	return &r, err
}

func cmpStr(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
