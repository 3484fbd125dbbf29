package huawei

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei/parse"
)

// pon is a PON port split for the CLI: `interface gpon F/S` then port P.
type pon struct{ f, s, p int }

func (p pon) String() string { return fmt.Sprintf("%d/%d/%d", p.f, p.s, p.p) }
func (p pon) board() string  { return fmt.Sprintf("%d/%d", p.f, p.s) }

func parsePON(s string) (pon, error) {
	f, sl, p, ok := parse.SplitFSP(strings.TrimSpace(s))
	if !ok {
		return pon{}, &driver.ArgError{Reason: fmt.Sprintf("port %q is not frame/slot/port", s)}
	}
	return pon{f, sl, p}, nil
}

// absent reports an OLT answer that only means "there is nothing", which
// reading operations turn into an empty result.
func absent(err error) bool {
	var ce *driver.CommandError
	if !errors.As(err, &ce) {
		return false
	}
	for _, s := range []string{"do not exist", "No service virtual port", "There is no ONT", "does not exist"} {
		if strings.Contains(ce.Text, s) {
			return true
		}
	}
	return false
}

// inInterface runs fn inside `interface <kind> F/S` and quits again.
func (c *call) inInterface(ctx context.Context, kind, board string, fn func() error) error {
	if _, err := c.s.exec(ctx, "interface "+kind+" "+board); err != nil {
		return err
	}
	err := fn()
	if _, qerr := c.s.exec(ctx, "quit"); err == nil {
		err = qerr
	}
	return err
}

var ntpRe = regexp.MustCompile(`clock status:\s*(\S+)`)

// Info implements driver.Driver.
func (d *Driver) Info(ctx context.Context, o driver.Options) (*driver.InfoResult, error) {
	r := &driver.InfoResult{}
	err := d.do(ctx, "info", o, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, "display version")
		if err != nil {
			return err
		}
		v := parse.ParseVersion(out)
		r.Product, r.Version, r.Patch, r.Uptime = v.Product, v.Version, v.Patch, v.Uptime
		if out, err = c.read(ctx, "display board 0"); err != nil {
			return err
		}
		r.Boards = parse.ParseBoards(out)
		if out, err = c.read(ctx, "display time"); err != nil {
			return err
		}
		r.Time = strings.TrimSpace(out)
		if out, err = c.read(ctx, "display ntp-service status"); err != nil {
			return err
		}
		if m := ntpRe.FindStringSubmatch(out); m != nil {
			r.NTP = m[1]
		}
		r.Sysname = strings.SplitN(c.s.prompt, "(", 2)[0]
		return nil
	})
	return r, err
}

// Autofind implements driver.Driver.
func (d *Driver) Autofind(ctx context.Context, o driver.Options) (*driver.AutofindResult, error) {
	r := &driver.AutofindResult{ONTs: []driver.AutofindONT{}}
	err := d.do(ctx, "autofind", o, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, "display ont autofind all")
		if absent(err) {
			return nil
		}
		r.ONTs = parse.ParseAutofind(out)
		r.Count = len(r.ONTs)
		return err
	})
	return r, err
}

func (c *call) onts(ctx context.Context, port string) ([]driver.ONT, error) {
	cmd := "display ont info 0 all"
	if port != "" {
		p, err := parsePON(port)
		if err != nil {
			return nil, err
		}
		cmd = fmt.Sprintf("display ont info %d %d %d all", p.f, p.s, p.p)
	}
	out, err := c.read(ctx, cmd)
	if absent(err) {
		return []driver.ONT{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parse.ParseONTTable(out).ONTs, nil
}

// ONUs implements driver.Driver.
func (d *Driver) ONUs(ctx context.Context, a driver.PortArgs) (*driver.ONUsResult, error) {
	r := &driver.ONUsResult{ONTs: []driver.ONT{}}
	err := d.do(ctx, "onus", a.Options, func(ctx context.Context, c *call) error {
		onts, err := c.onts(ctx, a.Port)
		if err == nil {
			r.ONTs, r.Count = onts, len(onts)
		}
		return err
	})
	return r, err
}

func (c *call) section(ctx context.Context, name string) (parse.Config, error) {
	out, err := c.read(ctx, "display current-configuration section "+name)
	if absent(err) {
		return parse.ParseConfig(""), nil
	}
	return parse.ParseConfig(out), err
}

func (c *call) uplinks(ctx context.Context) (map[string]driver.UplinkPort, error) {
	vc, err := c.section(ctx, "vlan-config")
	if err != nil {
		return nil, err
	}
	mc, err := c.section(ctx, "mpu")
	if err != nil {
		return nil, err
	}
	out := map[string]driver.UplinkPort{}
	for p, u := range vc.UplinkPorts {
		u.Native = 1
		out[p] = u
	}
	for p, u := range mc.UplinkPorts {
		x := out[p]
		if x.VLANs == nil {
			x.VLANs = []int{}
		}
		x.Native = u.Native
		out[p] = x
	}
	return out, nil
}

// VLANs implements driver.Driver.
func (d *Driver) VLANs(ctx context.Context, o driver.Options) (*driver.VLANsResult, error) {
	r := &driver.VLANsResult{}
	err := d.do(ctx, "vlans", o, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, "display vlan all")
		if err != nil {
			return err
		}
		r.VLANs = parse.ParseVLANs(out)
		r.Count = len(r.VLANs)
		r.UplinkPorts, err = c.uplinks(ctx)
		return err
	})
	return r, err
}

func (c *call) servicePorts(ctx context.Context, cmd string) ([]driver.ServicePort, error) {
	out, err := c.read(ctx, cmd)
	if absent(err) {
		return []driver.ServicePort{}, nil
	}
	if err != nil {
		return nil, err
	}
	return parse.ParseServicePorts(out).ServicePorts, nil
}

// ServicePorts implements driver.Driver.
func (d *Driver) ServicePorts(ctx context.Context, o driver.Options) (*driver.ServicePortsResult, error) {
	r := &driver.ServicePortsResult{}
	err := d.do(ctx, "serviceports", o, func(ctx context.Context, c *call) error {
		sps, err := c.servicePorts(ctx, "display service-port all")
		r.ServicePorts, r.Count = sps, len(sps)
		return err
	})
	return r, err
}

// Profiles implements driver.Driver.
func (d *Driver) Profiles(ctx context.Context, o driver.Options) (*driver.ProfilesResult, error) {
	r := &driver.ProfilesResult{}
	err := d.do(ctx, "profiles", o, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, "display dba-profile all")
		if err != nil {
			return err
		}
		r.DBA = parse.ParseDBAProfiles(out)
		if out, err = c.read(ctx, "display ont-lineprofile gpon all"); err != nil {
			return err
		}
		r.Line = parse.ParseProfiles(out)
		if out, err = c.read(ctx, "display ont-srvprofile gpon all"); err != nil {
			return err
		}
		r.Service = parse.ParseProfiles(out)
		r.TrafficTables, err = c.trafficTables(ctx)
		return err
	})
	return r, err
}

func (c *call) trafficTables(ctx context.Context) ([]driver.TrafficTable, error) {
	out, err := c.read(ctx, "display traffic table ip from-index 0")
	if err != nil {
		return nil, err
	}
	return parse.ParseTrafficTables(out), nil
}

// Config implements driver.Driver.
func (d *Driver) Config(ctx context.Context, o driver.Options) (*driver.ConfigResult, error) {
	r := &driver.ConfigResult{}
	err := d.do(ctx, "config", o, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, "display current-configuration")
		r.Config = strings.TrimSpace(out) + "\n"
		r.Lines = strings.Count(r.Config, "\n")
		return err
	})
	return r, err
}

// Run implements driver.Driver: only `display ...` commands pass.
func (d *Driver) Run(ctx context.Context, a driver.RunArgs) (*driver.RunResult, error) {
	cmd := strings.TrimSpace(a.Command)
	if f := strings.Fields(cmd); len(f) == 0 || f[0] != "display" || strings.ContainsAny(cmd, "\r\n") {
		return nil, &driver.Error{Op: "run", Err: &driver.ArgError{Reason: "run only accepts one display command; use exec"}}
	}
	r := &driver.RunResult{Command: cmd}
	err := d.do(ctx, "run", a.Options, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, cmd)
		r.Output = out
		return err
	})
	return r, err
}

// Boards implements driver.Driver.
func (d *Driver) Boards(ctx context.Context, o driver.Options) (*driver.BoardsResult, error) {
	r := &driver.BoardsResult{}
	err := d.do(ctx, "boards", o, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, "display board 0")
		r.Boards = parse.ParseBoards(out)
		r.Count = len(r.Boards)
		return err
	})
	return r, err
}

// ponPorts lists the PON ports of every GPON board (or just port).
func (c *call) ponPorts(ctx context.Context, port string) ([]driver.PONPort, error) {
	var slots []string
	if port != "" {
		p, err := parsePON(port)
		if err != nil {
			return nil, err
		}
		slots = []string{p.board()}
	} else {
		out, err := c.read(ctx, "display board 0")
		if err != nil {
			return nil, err
		}
		for _, b := range parse.ParseBoards(out) {
			if strings.Contains(b.Board, "GP") || strings.Contains(b.Board, "XG") {
				slots = append(slots, fmt.Sprintf("0/%d", b.Slot))
			}
		}
	}
	ports := []driver.PONPort{}
	for _, sl := range slots {
		out, err := c.read(ctx, "display board "+sl)
		if err != nil {
			return nil, err
		}
		for _, p := range parse.ParseBoardPorts(out, sl).Ports {
			if port == "" || p.Port == port {
				ports = append(ports, p)
			}
		}
	}
	return ports, nil
}

// PONPorts implements driver.Driver.
func (d *Driver) PONPorts(ctx context.Context, a driver.PortArgs) (*driver.PONPortsResult, error) {
	r := &driver.PONPortsResult{}
	err := d.do(ctx, "pon-ports", a.Options, func(ctx context.Context, c *call) error {
		ports, err := c.ponPorts(ctx, a.Port)
		r.Ports, r.Count = ports, len(ports)
		return err
	})
	return r, err
}

// PortOptical implements driver.Driver.
func (d *Driver) PortOptical(ctx context.Context, a driver.PortArgs) (*driver.PortOpticalResult, error) {
	r := &driver.PortOpticalResult{Ports: []driver.PortOptical{}}
	err := d.do(ctx, "port-optical", a.Options, func(ctx context.Context, c *call) error {
		ports, err := c.ponPorts(ctx, a.Port)
		if err != nil {
			return err
		}
		byBoard := map[string][]pon{}
		var boards []string
		for _, pp := range ports {
			p, _ := parsePON(pp.Port)
			if byBoard[p.board()] == nil {
				boards = append(boards, p.board())
			}
			byBoard[p.board()] = append(byBoard[p.board()], p)
		}
		for _, b := range boards {
			err := c.inInterface(ctx, "gpon", b, func() error {
				for _, p := range byBoard[b] {
					out, err := c.read(ctx, fmt.Sprintf("display port state %d", p.p))
					if err != nil {
						return err
					}
					r.Ports = append(r.Ports, parse.ParsePortOptical(out)...)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		r.Count = len(r.Ports)
		return nil
	})
	return r, err
}

// ONTOptical implements driver.Driver.
func (d *Driver) ONTOptical(ctx context.Context, a driver.ONTOpticalArgs) (*driver.ONTOpticalResult, error) {
	p, err := parsePON(a.Port)
	if err != nil {
		return nil, &driver.Error{Op: "ont-optical", Err: err}
	}
	r := &driver.ONTOpticalResult{Port: p.String(), ONTs: []driver.ONTOptical{}}
	err = d.do(ctx, "ont-optical", a.Options, func(ctx context.Context, c *call) error {
		return c.inInterface(ctx, "gpon", p.board(), func() error {
			if a.ONTID == nil {
				out, err := c.read(ctx, fmt.Sprintf("display ont optical-info %d all", p.p))
				if absent(err) {
					return nil
				}
				r.ONTs = parse.ParseONTOptical(out)
				return err
			}
			out, err := c.read(ctx, fmt.Sprintf("display ont optical-info %d %d", p.p, *a.ONTID))
			if err != nil {
				return err
			}
			if o, ok := parse.ParseONTOpticalDetail(out, *a.ONTID); ok {
				r.ONTs = append(r.ONTs, o)
			}
			return nil
		})
	})
	return r, err
}

// ONTDownCause reads one ONT's last down cause as the OLT reports it
// (`display ont info F S P ID`: LOS, dying-gasp, ...); "" when it prints
// none. The poller puts it in ont.offline events.
func (d *Driver) ONTDownCause(ctx context.Context, port string, id int) (string, error) {
	p, err := parsePON(port)
	if err != nil {
		return "", err
	}
	var cause string
	// Read under onus, the operation whose detail this is.
	err = d.do(ctx, "onus", driver.Options{}, func(ctx context.Context, c *call) error {
		out, err := c.read(ctx, fmt.Sprintf("display ont info %d %d %d %d", p.f, p.s, p.p, id))
		if err != nil {
			return err
		}
		if det, ok := parse.ParseONTDetail(out); ok && det.LastDownCause != "-" {
			cause = det.LastDownCause
		}
		return nil
	})
	return cause, err
}
