package olt

import (
	"context"
	"strconv"

	"routerd.dev/proto/api"
	"routerd.dev/services/olt/driver"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
)

// opEndpoints binds every operation of Document 3 to its driver method:
// each request's arguments become the driver's typed arguments.
func (s *Service) opEndpoints() []bus.Endpoint {
	plain := func(f func(driver.Driver, context.Context, driver.Options) (any, error)) opCall[api.OLTOpRequest] {
		return func(ctx context.Context, d driver.Driver, r *api.OLTOpRequest, o driver.Options) (any, error) {
			return f(d, ctx, o)
		}
	}
	port := func(f func(driver.Driver, context.Context, driver.PortArgs) (any, error)) opCall[api.OLTOpRequest] {
		return func(ctx context.Context, d driver.Driver, r *api.OLTOpRequest, o driver.Options) (any, error) {
			return f(d, ctx, driver.PortArgs{Options: o, Port: r.PONPort()})
		}
	}
	ref := func(f func(driver.Driver, context.Context, driver.ONTRefArgs) (any, error)) opCall[api.OLTONTRef] {
		return func(ctx context.Context, d driver.Driver, r *api.OLTONTRef, o driver.Options) (any, error) {
			return f(d, ctx, driver.ONTRefArgs{Options: o, Port: r.PONPort(), ONTID: r.ONTID, ExpectSVLAN: r.ExpectSVLAN})
		}
	}
	return []bus.Endpoint{
		bindOp(s, api.OLTInfo, plain(func(d driver.Driver, ctx context.Context, o driver.Options) (any, error) { return d.Info(ctx, o) })),
		bindOp(s, api.OLTAutofind, plain(func(d driver.Driver, ctx context.Context, o driver.Options) (any, error) { return d.Autofind(ctx, o) })),
		bindOp(s, api.OLTONUs, port(func(d driver.Driver, ctx context.Context, a driver.PortArgs) (any, error) { return d.ONUs(ctx, a) })),
		bindOp(s, api.OLTVLANs, plain(func(d driver.Driver, ctx context.Context, o driver.Options) (any, error) { return d.VLANs(ctx, o) })),
		bindOp(s, api.OLTServicePorts, plain(func(d driver.Driver, ctx context.Context, o driver.Options) (any, error) {
			return d.ServicePorts(ctx, o)
		})),
		bindOp(s, api.OLTProfiles, plain(func(d driver.Driver, ctx context.Context, o driver.Options) (any, error) { return d.Profiles(ctx, o) })),
		bindOp(s, api.OLTConfig, plain(func(d driver.Driver, ctx context.Context, o driver.Options) (any, error) { return d.Config(ctx, o) })),
		bindOp(s, api.OLTRunOp, func(ctx context.Context, d driver.Driver, r *api.OLTRun, o driver.Options) (any, error) {
			return d.Run(ctx, driver.RunArgs{Options: o, Command: r.Command})
		}),
		bindOp(s, api.OLTAuditOp, func(ctx context.Context, d driver.Driver, r *api.OLTAudit, o driver.Options) (any, error) {
			return d.Audit(ctx, driver.AuditArgs{Options: o, SVLAN: r.SVLAN, Ports: r.Ports})
		}),
		bindOp(s, api.OLTBoards, plain(func(d driver.Driver, ctx context.Context, o driver.Options) (any, error) { return d.Boards(ctx, o) })),
		bindOp(s, api.OLTPONPorts, port(func(d driver.Driver, ctx context.Context, a driver.PortArgs) (any, error) { return d.PONPorts(ctx, a) })),
		bindOp(s, api.OLTPortOptical, port(func(d driver.Driver, ctx context.Context, a driver.PortArgs) (any, error) {
			return d.PortOptical(ctx, a)
		})),
		bindOp(s, api.OLTCountersOp, func(ctx context.Context, d driver.Driver, r *api.OLTCounters, o driver.Options) (any, error) {
			return d.Counters(ctx, driver.CountersArgs{Options: o, Port: r.PONPort(), ONTID: r.ONTID, Uplinks: r.Uplinks, ONTs: r.ONTs})
		}),
		bindOp(s, api.OLTONTOpticalOp, func(ctx context.Context, d driver.Driver, r *api.OLTONTOptical, o driver.Options) (any, error) {
			a := driver.ONTOpticalArgs{Options: o, Port: r.PONPort()}
			if r.ONTID != "" && r.ONTID != "all" {
				n, _ := strconv.Atoi(r.ONTID)
				a.ONTID = &n
			}
			return d.ONTOptical(ctx, a)
		}),
		bindOp(s, api.OLTExecOp, func(ctx context.Context, d driver.Driver, r *api.OLTExec, o driver.Options) (any, error) {
			return d.Exec(ctx, driver.ExecArgs{Options: o, Commands: r.Commands})
		}),
		bindOp(s, api.OLTVLANAddOp, func(ctx context.Context, d driver.Driver, r *api.OLTVLANAdd, o driver.Options) (any, error) {
			return d.VLANAdd(ctx, driver.VLANAddArgs{Options: o, VLAN: r.VLAN, Type: r.Type, Attribute: r.Attribute, Description: r.Description, Uplinks: r.Uplinks})
		}),
		bindOp(s, api.OLTVLANDelOp, func(ctx context.Context, d driver.Driver, r *api.OLTVLANDel, o driver.Options) (any, error) {
			return d.VLANDel(ctx, driver.VLANDelArgs{Options: o, VLAN: r.VLAN, Uplinks: r.Uplinks})
		}),
		bindOp(s, api.OLTPortVLANOp, func(ctx context.Context, d driver.Driver, r *api.OLTPortVLAN, o driver.Options) (any, error) {
			return d.PortVLAN(ctx, driver.PortVLANArgs{Options: o, VLAN: r.VLAN, Port: r.PONPort(), Remove: r.Remove})
		}),
		bindOp(s, api.OLTProfileAdd, func(ctx context.Context, d driver.Driver, r *api.OLTProfile, o driver.Options) (any, error) {
			return d.ProfileAdd(ctx, profileArgs(r, o))
		}),
		bindOp(s, api.OLTProfileDel, func(ctx context.Context, d driver.Driver, r *api.OLTProfile, o driver.Options) (any, error) {
			return d.ProfileDel(ctx, profileArgs(r, o))
		}),
		bindOp(s, api.OLTONTAddOp, s.ontAdd),
		bindOp(s, api.OLTONTDel, ref(func(d driver.Driver, ctx context.Context, a driver.ONTRefArgs) (any, error) { return d.ONTDel(ctx, a) })),
		bindOp(s, api.OLTONTReboot, ref(func(d driver.Driver, ctx context.Context, a driver.ONTRefArgs) (any, error) {
			return d.ONTReboot(ctx, a)
		})),
		bindOp(s, api.OLTONTActivate, ref(func(d driver.Driver, ctx context.Context, a driver.ONTRefArgs) (any, error) {
			return d.ONTActivate(ctx, a)
		})),
		bindOp(s, api.OLTONTDeactivate, ref(func(d driver.Driver, ctx context.Context, a driver.ONTRefArgs) (any, error) {
			return d.ONTDeactivate(ctx, a)
		})),
		bindOp(s, api.OLTONTDescOp, func(ctx context.Context, d driver.Driver, r *api.OLTONTDesc, o driver.Options) (any, error) {
			return d.ONTDesc(ctx, driver.ONTDescArgs{Options: o, Port: r.PONPort(), ONTID: r.ONTID, Description: r.Description})
		}),
		bindOp(s, api.OLTONTReplanOp, func(ctx context.Context, d driver.Driver, r *api.OLTONTReplan, o driver.Options) (any, error) {
			return d.ONTReplan(ctx, driver.ONTReplanArgs{Options: o, Port: r.PONPort(), ONTID: r.ONTID, Plan: r.Plan,
				DownKbps: r.DownKbps, UpKbps: r.UpKbps, VLAN: r.VLAN, UserVLAN: r.UserVLAN, SVLAN: r.SVLAN, ExpectSVLAN: r.ExpectSVLAN})
		}),
		bindOp(s, api.OLTNTPOp, func(ctx context.Context, d driver.Driver, r *api.OLTNTP, o driver.Options) (any, error) {
			return d.NTP(ctx, driver.NTPArgs{Options: o, Servers: r.Servers, Remove: r.Remove})
		}),
		bindOp(s, api.OLTSysnameOp, func(ctx context.Context, d driver.Driver, r *api.OLTSysname, o driver.Options) (any, error) {
			return d.Sysname(ctx, driver.SysnameArgs{Options: o, Name: r.Name})
		}),
		bindOp(s, api.OLTSave, plain(func(d driver.Driver, ctx context.Context, o driver.Options) (any, error) { return d.Save(ctx, o) })),
		bindOp(s, api.OLTPlanSyncOp, func(ctx context.Context, d driver.Driver, r *api.OLTPlanSync, o driver.Options) (any, error) {
			a := driver.PlanSyncArgs{Options: o}
			for _, p := range r.Plans {
				a.Plans = append(a.Plans, driver.Plan{Name: p.Name, DownKbps: p.DownKbps, UpKbps: p.UpKbps})
			}
			return d.PlanSync(ctx, a)
		}),
		bindOp(s, api.OLTInitOp, func(ctx context.Context, d driver.Driver, r *api.OLTInit, o driver.Options) (any, error) {
			return d.Init(ctx, driver.InitArgs{Options: o, SVLAN: r.SVLAN, Uplinks: r.Uplinks})
		}),
	}
}

func profileArgs(r *api.OLTProfile, o driver.Options) driver.ProfileArgs {
	return driver.ProfileArgs{Options: o, Kind: r.Kind, ID: r.ID, Name: r.Name, Kbps: r.Kbps,
		DBAProfileID: r.DBAProfileID, Gemport: r.Gemport, VLAN: r.VLAN, ETHPorts: r.ETHPorts}
}

// ontAdd resolves the request's plan against the router's plans (the
// subscribers service); an unknown plan is a 404 and nothing is sent.
func (s *Service) ontAdd(ctx context.Context, d driver.Driver, r *api.OLTONTAdd, o driver.Options) (any, error) {
	a := driver.ONTAddArgs{Options: o, Port: r.PONPort(), SN: r.SN, VLAN: r.VLAN, UserVLAN: r.UserVLAN,
		Description: r.Description, DownKbps: r.DownKbps, UpKbps: r.UpKbps, LineProfile: r.LineProfile,
		SrvProfile: r.SrvProfile, ProfileID: r.ProfileID, SVLAN: r.SVLAN, IPTV: r.IPTV, IPTVVLAN: r.IPTVVLAN,
		ETHPorts: r.ETHPorts, Gemport: r.Gemport}
	if r.Plan != "" {
		p, err := bus.Invoke(ctx, s.deps.NC, api.PlansGet, &api.PlanRef{Name: r.Plan})
		if err != nil {
			if ae := apierr.From(err); ae.Kind == apierr.KindNotFound {
				return nil, apierr.NotFound("No such plan: %s", r.Plan)
			}
			return nil, apierr.Unavailable("the plan %s could not be read: %v", r.Plan, err)
		}
		a.Plan = &driver.Plan{Name: p.Name, DownKbps: int(p.DownMbps * 1000), UpKbps: int(p.UpMbps * 1000)}
	}
	return d.ONTAdd(ctx, a)
}
