package huawei

import (
	"context"
	"fmt"

	"routerd.dev/services/olt/driver"
)

func (d *Driver) ontRef(op string, a driver.ONTRefArgs) (pon, error) {
	p, err := parsePON(a.Port)
	if err != nil {
		return pon{}, &driver.Error{Op: op, Err: err}
	}
	if a.ONTID < 0 || a.ONTID > 255 {
		return pon{}, argErr(op, "ont_id must be 0-255")
	}
	return p, nil
}

// ONTDel implements driver.Driver: the ONT's service-ports are removed
// first (the OLT refuses to delete an ONT that has any), then the ONT.
func (d *Driver) ONTDel(ctx context.Context, a driver.ONTRefArgs) (*driver.ONTDelResult, error) {
	const op = "ont-del"
	p, err := d.ontRef(op, a)
	if err != nil {
		return nil, err
	}
	r := &driver.ONTDelResult{Port: p.String(), ONTID: a.ONTID, ServicePortsRemoved: []int{}}
	err = d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		sps, err := c.ontGuard(ctx, p, a.ONTID, a.Force, a.ExpectSVLAN)
		if err != nil {
			return err
		}
		for _, sp := range sps {
			if _, err := c.write(ctx, fmt.Sprintf("undo service-port %d", sp.Index)); err != nil {
				return err
			}
			r.ServicePortsRemoved = append(r.ServicePortsRemoved, sp.Index)
		}
		if _, err := c.write(ctx, "interface gpon "+p.board()); err != nil {
			return err
		}
		if _, err := c.write(ctx, fmt.Sprintf("ont delete %d %d", p.p, a.ONTID)); err != nil {
			return err
		}
		if _, err := c.write(ctx, "quit"); err != nil {
			return err
		}
		r.Deleted = !c.dry
		r.WriteResult = c.result()
		return nil
	})
	return r, err
}

// ontCommand runs one `ont <verb> P ID` in the GPON interface after the
// guards.
func (d *Driver) ontCommand(ctx context.Context, op string, a driver.ONTRefArgs, verb string) (pon, driver.WriteResult, error) {
	p, err := d.ontRef(op, a)
	if err != nil {
		return p, driver.WriteResult{}, err
	}
	var wr driver.WriteResult
	err = d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		if _, err := c.ontGuard(ctx, p, a.ONTID, a.Force, a.ExpectSVLAN); err != nil {
			return err
		}
		for _, cmd := range []string{"interface gpon " + p.board(), fmt.Sprintf("ont %s %d %d", verb, p.p, a.ONTID), "quit"} {
			if _, err := c.write(ctx, cmd); err != nil {
				return err
			}
		}
		wr = c.result()
		return nil
	})
	return p, wr, err
}

// ONTReboot implements driver.Driver (`ont reset`, confirmed with y).
func (d *Driver) ONTReboot(ctx context.Context, a driver.ONTRefArgs) (*driver.ONTRebootResult, error) {
	p, wr, err := d.ontCommand(ctx, "ont-reboot", a, "reset")
	return &driver.ONTRebootResult{WriteResult: wr, Port: p.String(), ONTID: a.ONTID, Rebooted: err == nil && !wr.DryRun}, err
}

// ONTActivate implements driver.Driver.
func (d *Driver) ONTActivate(ctx context.Context, a driver.ONTRefArgs) (*driver.ONTActiveResult, error) {
	p, wr, err := d.ontCommand(ctx, "ont-activate", a, "activate")
	return &driver.ONTActiveResult{WriteResult: wr, Port: p.String(), ONTID: a.ONTID, Active: true}, err
}

// ONTDeactivate implements driver.Driver.
func (d *Driver) ONTDeactivate(ctx context.Context, a driver.ONTRefArgs) (*driver.ONTActiveResult, error) {
	p, wr, err := d.ontCommand(ctx, "ont-deactivate", a, "deactivate")
	return &driver.ONTActiveResult{WriteResult: wr, Port: p.String(), ONTID: a.ONTID, Active: false}, err
}

// ONTDesc implements driver.Driver. The description is the ONT's own
// label, not a service-port, so only the ONT-on-another-S-VLAN guard
// applies (an ONT without service-ports may be labelled).
func (d *Driver) ONTDesc(ctx context.Context, a driver.ONTDescArgs) (*driver.ONTDescResult, error) {
	const op = "ont-desc"
	p, err := d.ontRef(op, driver.ONTRefArgs{Port: a.Port, ONTID: a.ONTID})
	if err != nil {
		return nil, err
	}
	r := &driver.ONTDescResult{Port: p.String(), ONTID: a.ONTID, Description: a.Description}
	err = d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		if _, err := c.ontGuard(ctx, p, a.ONTID, true, 0); err != nil {
			return err
		}
		for _, cmd := range []string{"interface gpon " + p.board(),
			fmt.Sprintf(`ont modify %d %d desc "%s"`, p.p, a.ONTID, a.Description), "quit"} {
			if _, err := c.write(ctx, cmd); err != nil {
				return err
			}
		}
		r.WriteResult = c.result()
		return nil
	})
	return r, err
}

// ONTReplan implements driver.Driver: every service-port of the ONT on
// this router's S-VLAN (all of them on an unshared OLT) is re-created
// under its own index with the new rate tables and VLANs.
func (d *Driver) ONTReplan(ctx context.Context, a driver.ONTReplanArgs) (*driver.ONTReplanResult, error) {
	const op = "ont-replan"
	p, err := d.ontRef(op, driver.ONTRefArgs{Port: a.Port, ONTID: a.ONTID})
	if err != nil {
		return nil, err
	}
	if a.Plan == "" || a.DownKbps <= 0 || a.UpKbps <= 0 || !validVLAN(a.VLAN) {
		return nil, argErr(op, "plan, down_kbps, up_kbps and vlan are required")
	}
	svlan := cmpOr(a.SVLAN, d.cfg.SVLAN)
	if d.shared() && a.SVLAN != 0 && a.SVLAN != d.cfg.SVLAN {
		return nil, &driver.Error{Op: op, Err: &driver.GuardError{Reason: fmt.Sprintf("S-VLAN %d is not this router's", a.SVLAN)}}
	}
	uv := cmpOr(a.UserVLAN, a.VLAN)
	r := &driver.ONTReplanResult{Port: p.String(), ONTID: a.ONTID, ServicePorts: []int{}}
	err = d.do(ctx, op, a.Options, func(ctx context.Context, c *call) error {
		sps, err := c.ontGuard(ctx, p, a.ONTID, false, a.ExpectSVLAN)
		if err != nil {
			return err
		}
		var tables []driver.TrafficTable
		up, err := c.trafficTable(ctx, d.withHeadroom(a.UpKbps), &tables)
		if err != nil {
			return err
		}
		down, err := c.trafficTable(ctx, d.withHeadroom(a.DownKbps), &tables)
		if err != nil {
			return err
		}
		for _, sp := range sps {
			if sp.VLAN != cmpOr(svlan, a.VLAN) {
				continue // the IPTV or expect_svlan flow keeps its tables
			}
			idx := fmt.Sprint(sp.Index)
			if _, err := c.write(ctx, "undo service-port "+idx); err != nil {
				return err
			}
			if _, err := c.write(ctx, servicePortCmd(idx, svlan, a.VLAN, p, fmt.Sprint(a.ONTID), sp.Gem, uv, up, down)); err != nil {
				return err
			}
			r.ServicePorts = append(r.ServicePorts, sp.Index)
		}
		if !c.dry {
			fmt.Sscan(up, &r.Car.In)
			fmt.Sscan(down, &r.Car.Out)
		}
		r.WriteResult = c.result()
		return nil
	})
	return r, err
}
