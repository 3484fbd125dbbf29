package huawei

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei/parse"
)

// Counters implements driver.Driver. PON ports' own counters come from
// `display statistics port P` in the GPON interface, one ONT's from
// `display statistics ont P ID`, uplinks' from the MPU interface.
func (d *Driver) Counters(ctx context.Context, a driver.CountersArgs) (*driver.CountersResult, error) {
	r := &driver.CountersResult{Counters: []driver.Counter{}}
	if a.ONTID != nil && a.Port == "" {
		return nil, &driver.Error{Op: "counters", Err: &driver.ArgError{Reason: "ont_id needs port"}}
	}
	err := d.do(ctx, "counters", a.Options, func(ctx context.Context, c *call) error {
		type target struct {
			p     pon
			ontID *int
		}
		var targets []target
		switch {
		case a.ONTID != nil:
			p, err := parsePON(a.Port)
			if err != nil {
				return err
			}
			targets = append(targets, target{p, a.ONTID})
		case a.ONTs:
			onts, err := c.onts(ctx, a.Port)
			if err != nil {
				return err
			}
			for _, o := range onts {
				p, _ := parsePON(o.Port)
				id := o.ID
				targets = append(targets, target{p, &id})
			}
		default:
			ports, err := c.ponPorts(ctx, a.Port)
			if err != nil {
				return err
			}
			for _, pp := range ports {
				p, _ := parsePON(pp.Port)
				targets = append(targets, target{p: p})
			}
		}
		for _, t := range targets {
			err := c.inInterface(ctx, "gpon", t.p.board(), func() error {
				cmd, kind := fmt.Sprintf("display statistics port %d", t.p.p), "pon"
				if t.ontID != nil {
					cmd, kind = fmt.Sprintf("display statistics ont %d %d", t.p.p, *t.ontID), "ont"
				}
				out, err := c.read(ctx, cmd)
				if err != nil {
					return err
				}
				r.Counters = append(r.Counters, driver.Counter{Port: t.p.String(), ONTID: t.ontID, Kind: kind, Values: parse.ParseCounters(out)})
				return nil
			})
			if err != nil {
				return err
			}
		}
		if a.Uplinks {
			out, err := c.read(ctx, "display board 0")
			if err != nil {
				return err
			}
			for _, b := range parse.ParseBoards(out) {
				if !strings.Contains(b.Board, "MP") {
					continue
				}
				board := fmt.Sprintf("0/%d", b.Slot)
				err := c.inInterface(ctx, "mpu", board, func() error {
					for p := range 4 {
						out, err := c.read(ctx, fmt.Sprintf("display statistics port %d", p))
						if err != nil {
							return err
						}
						r.Counters = append(r.Counters, driver.Counter{Port: fmt.Sprintf("%s/%d", board, p), Kind: "uplink",
							Values: parse.ParseCounters(out)})
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
		}
		r.Count = len(r.Counters)
		return nil
	})
	return r, err
}

// Audit implements driver.Driver: what the OLT holds for this router on
// svlan, read only.
func (d *Driver) Audit(ctx context.Context, a driver.AuditArgs) (*driver.AuditResult, error) {
	if a.SVLAN < 1 || a.SVLAN > 4094 {
		return nil, &driver.Error{Op: "audit", Err: &driver.ArgError{Reason: "svlan must be 1-4094"}}
	}
	r := &driver.AuditResult{SVLAN: a.SVLAN, Uplinks: []driver.AuditUplink{}, ServicePorts: []driver.ServicePort{},
		Rates: map[string]driver.Rate{}, ONTs: []driver.ONT{}, PlanPrefix: d.cfg.Prefix}
	err := d.do(ctx, "audit", a.Options, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, "display vlan all")
		if err != nil {
			return err
		}
		for _, v := range parse.ParseVLANs(out) {
			if v.ID == a.SVLAN {
				r.Exists, r.Type, r.Attribute = true, v.Type, v.Attribute
			}
		}
		ups, err := c.uplinks(ctx)
		if err != nil {
			return err
		}
		var ports []string
		for p, u := range ups {
			for _, v := range u.VLANs {
				if v == a.SVLAN {
					ports = append(ports, p)
				}
			}
		}
		sort.Strings(ports)
		for _, p := range ports {
			u := driver.AuditUplink{Port: p, NativeVLAN: ups[p].Native, State: "unknown"}
			pp, _ := parsePON(p)
			err := c.inInterface(ctx, "mpu", pp.board(), func() error {
				out, err := c.read(ctx, fmt.Sprintf("display port state %d", pp.p))
				if err != nil {
					return err
				}
				for _, g := range parse.KeyValues(out) {
					for _, kv := range g {
						if kv.Key == "Port state" {
							u.State = strings.ToLower(kv.Value)
						}
					}
				}
				return nil
			})
			if err != nil && !absent(err) {
				return err
			}
			r.Uplinks = append(r.Uplinks, u)
		}
		bbs, err := c.section(ctx, "bbs-config")
		if err != nil {
			return err
		}
		states := map[int]string{}
		table, err := c.servicePorts(ctx, fmt.Sprintf("display service-port vlan %d", a.SVLAN))
		if err != nil {
			return err
		}
		for _, sp := range table {
			states[sp.Index] = sp.State
		}
		for _, sp := range bbs.ServicePorts {
			if sp.VLAN != a.SVLAN {
				continue
			}
			sp.State = states[sp.Index]
			r.ServicePorts = append(r.ServicePorts, sp)
		}
		global, err := c.section(ctx, "global-config")
		if err != nil {
			return err
		}
		r.Option82 = global.Option82 || bbs.Option82
		tables, err := c.trafficTables(ctx)
		if err != nil {
			return err
		}
		used := map[int]bool{}
		for _, sp := range r.ServicePorts {
			used[sp.Car.In], used[sp.Car.Out] = true, true
		}
		for _, t := range tables {
			if used[t.Index] {
				r.Rates[fmt.Sprint(t.Index)] = driver.Rate{CIR: t.CIR, PIR: t.PIR}
			}
		}
		for _, p := range a.Ports {
			onts, err := c.onts(ctx, p)
			if err != nil {
				return err
			}
			r.ONTs = append(r.ONTs, onts...)
		}
		return nil
	})
	return r, err
}
