package system

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/services/system/confdoc"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/config"
)

// checkTimeout bounds each of the doctor's checks: a check that has not
// answered by then is reported as such, and the rest are not held up.
const checkTimeout = 3 * time.Second

// oltAuditTimeout bounds the OLT check of ?olt=1: one audit per OLT, run
// concurrently, each a login and a few display commands.
const oltAuditTimeout = 45 * time.Second

// Disk space thresholds of the state directory.
const (
	diskWarnFraction     = 0.10
	diskCriticalFraction = 0.02
	diskCriticalBytes    = 256 << 20
)

// check is one of the doctor's checks: it reports its findings.
type check struct {
	name string
	run  func(ctx context.Context, olt bool) []api.Finding
	// timeout, when set, replaces checkTimeout (the OLT audit is a telnet
	// or SSH session per OLT).
	timeout time.Duration
}

func (s *Service) checks() []check {
	return []check{
		{name: "services", run: s.checkServices},
		{name: "dhcp", run: s.checkDHCP},
		{name: "configuration", run: s.checkConfiguration},
		{name: "nats", run: s.checkNATS},
		{name: "etcd", run: s.checkEtcd},
		{name: "disk", run: s.checkDisk},
		{name: "clock", run: s.checkClock},
		{name: "olt", run: s.checkOLT, timeout: oltAuditTimeout},
		{name: "drift", run: s.checkDrift},
		{name: "licence", run: s.checkLicence},
		{name: "snmp", run: s.checkSNMP},
	}
}

// expected are the services that should be on the bus.
func (s *Service) expected() []string {
	if s.deps.Expect != nil {
		return s.deps.Expect
	}
	var out []string
	for _, n := range config.Services {
		if n != "gateway" {
			out = append(out, n)
		}
	}
	return out
}

// findings runs every check concurrently, each within checkTimeout.
func (s *Service) findings(ctx context.Context, olt bool) []api.Finding {
	cs := s.checks()
	results := make([][]api.Finding, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			timeout := checkTimeout
			if c.timeout > 0 {
				timeout = c.timeout
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			done := make(chan []api.Finding, 1)
			go func() {
				defer func() {
					if p := recover(); p != nil {
						done <- []api.Finding{{Severity: "warning", Area: c.name, Problem: "the " + c.name + " check failed",
							Detail: fmt.Sprint(p), Fix: "report this with routerd's log"}}
					}
				}()
				done <- c.run(cctx, olt)
			}()
			select {
			case f := <-done:
				results[i] = f
			case <-cctx.Done():
				results[i] = []api.Finding{{Severity: "warning", Area: c.name,
					Problem: "the " + c.name + " check did not finish in time",
					Detail:  fmt.Sprintf("no result within %s", timeout), Fix: "run the doctor again; if it persists, see routerd's log"}}
			}
		}()
	}
	wg.Wait()
	var out []api.Finding
	for _, r := range results {
		out = append(out, r...)
	}
	rank := map[string]int{"critical": 0, "warning": 1, "info": 2}
	sort.SliceStable(out, func(i, j int) bool { return rank[out[i].Severity] < rank[out[j].Severity] })
	return out
}

func (s *Service) doctor(ctx context.Context, in *api.DoctorRequest) (*api.DoctorAnswer, error) {
	f := s.findings(ctx, in.OLT)
	a := &api.DoctorAnswer{Code: 200, Generated: s.deps.Now().Format("2006-01-02 15:04:05"), Findings: f}
	if a.Findings == nil {
		a.Findings = []api.Finding{}
	}
	for _, x := range f {
		switch x.Severity {
		case "critical":
			a.Counts.Critical++
		case "warning":
			a.Counts.Warning++
		default:
			a.Counts.Info++
		}
	}
	a.Count, a.OK = len(f), a.Counts.Critical == 0
	return a, nil
}

func (s *Service) checkServices(ctx context.Context, _ bool) []api.Finding {
	names := s.expected()
	up := make([]bool, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() { defer wg.Done(); up[i] = bus.Up(s.deps.NC, n, time.Second) }()
	}
	wg.Wait()
	var out []api.Finding
	for i, n := range names {
		if up[i] {
			continue
		}
		sev := "critical"
		if n == "olt" || n == "routing" {
			sev = "warning"
		}
		out = append(out, api.Finding{Severity: sev, Area: n,
			Problem: fmt.Sprintf("the %s service is not on the bus", n),
			Detail:  fmt.Sprintf("no instance of %s answered discovery within 1 s; its operations answer 503", n),
			Fix:     fmt.Sprintf("see routerd's log for %s (journalctl -u routerd); a dhcp replica standing by behind another host's lock does not register: check which routerd holds /router/locks/%s/", n, n)})
	}
	return out
}

func (s *Service) checkDHCP(ctx context.Context, _ bool) []api.Finding {
	if !slices.Contains(s.expected(), "dhcp") {
		return nil
	}
	st, err := bus.Invoke(ctx, s.deps.NC, api.DHCPStatus, &api.None{})
	if err != nil {
		return []api.Finding{{Severity: "critical", Area: "dhcp", Problem: "DHCP is not running",
			Detail: err.Error(), Fix: "subscribers get no addresses: see routerd's log for dhcp and restart routerd"}}
	}
	var out []api.Finding
	var cs struct {
		Source  string `json:"source"`
		Refused *struct {
			Revision int64  `json:"revision"`
			Error    string `json:"error"`
		} `json:"refused"`
	}
	raw, _ := json.Marshal(st.Config)
	_ = json.Unmarshal(raw, &cs)
	if cs.Refused != nil {
		out = append(out, api.Finding{Severity: "warning", Area: "dhcp", Problem: "the stored DHCP configuration was refused; the previous one stays in force",
			Detail: cs.Refused.Error, Fix: "correct the configuration (GET /networks, POST /net) or restore a saved version"})
	}
	if cs.Source == "none" {
		out = append(out, api.Finding{Severity: "info", Area: "dhcp", Problem: "no DHCP configuration is stored: DHCP serves nothing",
			Detail: "no served network", Fix: "add a served network: POST /net"})
	}
	out = append(out, s.checkServed(ctx, st.InForce)...)
	if cs.Source == "last applied" {
		out = append(out, api.Finding{Severity: "warning", Area: "dhcp", Problem: "DHCP serves its last applied configuration, not the stored one",
			Detail: "the stored configuration was refused at start", Fix: "correct the configuration or restore a saved version"})
	}
	return out
}

// checkSNMP reports an SNMP agent that is set up (a community stored) but
// not answering: the pollers of the NOC see the router go silent. An agent
// never set up is no finding; the graph service missing from the bus is
// the services check's.
func (s *Service) checkSNMP(ctx context.Context, _ bool) []api.Finding {
	if !slices.Contains(s.expected(), "graph") {
		return nil
	}
	st, err := bus.Invoke(ctx, s.deps.NC, api.SNMPStatus, &api.None{})
	if err != nil || st.Enabled != "yes" || st.Running {
		return nil
	}
	why := st.Problem
	if why == "" {
		why = "its sockets are not bound"
	}
	return []api.Finding{{Severity: "warning", Area: "snmp", Problem: "the SNMP agent is set up but not answering on " + st.Listen,
		Detail: why, Fix: "free the UDP port or set the community again (POST /snmp); GET /snmp says what the agent sees"}}
}

func (s *Service) checkConfiguration(ctx context.Context, _ bool) []api.Finding {
	if s.versions == nil {
		return nil
	}
	run, err := s.running(ctx)
	if err != nil {
		ae := apierr.From(err)
		if b, ok := ae.Fields["broken_data_files"]; ok {
			var out []api.Finding
			for _, k := range toStrings(b) {
				out = append(out, api.Finding{Severity: "critical", Area: "configuration",
					Problem: "a stored configuration document does not parse: " + k,
					Detail:  "operations reading it answer 500 with broken_data_files",
					Fix:     "restore a saved version (config-versions, POST /restore with an archive), or repair the key /router/" + k + " with etcdctl"})
			}
			return out
		}
		// A missing owner is the services check's finding.
		return nil
	}
	latest, err := s.versions.Latest(ctx)
	switch {
	case err != nil:
		return []api.Finding{{Severity: "warning", Area: "configuration", Problem: "saved configuration versions cannot be read",
			Detail: err.Error(), Fix: "see routerd's log"}}
	case latest == nil:
		return []api.Finding{{Severity: "info", Area: "configuration", Problem: "no configuration version is saved",
			Detail: "a restore or a mistake cannot be undone to a known state", Fix: "save one: POST /api?action=config-save"}}
	case latest.Digest != confdoc.Digest(run):
		return []api.Finding{{Severity: "info", Area: "configuration",
			Problem: fmt.Sprintf("the running configuration differs from the latest saved version (%d)", latest.ID),
			Detail:  "see GET /api?action=config-status and config-diff", Fix: "save it (config-save) when the change is wanted"}}
	}
	return nil
}

func (s *Service) checkNATS(ctx context.Context, _ bool) []api.Finding {
	if !s.deps.NC.IsConnected() {
		return []api.Finding{{Severity: "critical", Area: "nats", Problem: "the bus is not connected",
			Detail: s.deps.NC.Status().String(), Fix: "check the NATS server (nats_url) and routerd's log"}}
	}
	rtt, err := s.deps.NC.RTT()
	if err != nil {
		return []api.Finding{{Severity: "critical", Area: "nats", Problem: "the bus does not answer", Detail: err.Error(),
			Fix: "check the NATS server (nats_url) and routerd's log"}}
	}
	if rtt > 200*time.Millisecond {
		return []api.Finding{{Severity: "warning", Area: "nats", Problem: "the bus is slow",
			Detail: fmt.Sprintf("round trip %s", rtt), Fix: "check the load of the NATS server's host"}}
	}
	return nil
}

func (s *Service) checkEtcd(ctx context.Context, _ bool) []api.Finding {
	if s.deps.KV == nil {
		return nil
	}
	start := time.Now()
	if _, err := s.deps.KV.Get(ctx, "/router/system/health", clientv3.WithCountOnly()); err != nil {
		return []api.Finding{{Severity: "critical", Area: "etcd", Problem: "the configuration database does not answer",
			Detail: err.Error(), Fix: "check etcd (etcd_endpoints, or state_dir/etcd for the embedded one) and its disk"}}
	}
	var out []api.Finding
	if d := time.Since(start); d > 500*time.Millisecond {
		out = append(out, api.Finding{Severity: "warning", Area: "etcd", Problem: "the configuration database is slow",
			Detail: fmt.Sprintf("a read took %s", d.Round(time.Millisecond)), Fix: "check the disk under etcd's data directory"})
	}
	if al, err := s.deps.KV.AlarmList(ctx); err == nil {
		for _, a := range al.Alarms {
			out = append(out, api.Finding{Severity: "critical", Area: "etcd", Problem: "the configuration database raised an alarm: " + a.Alarm.String(),
				Detail: fmt.Sprintf("member %x", a.MemberID), Fix: "NOSPACE: compact and defragment etcd (etcdctl compact, defrag), then disarm the alarm; CORRUPT: restore from a backup"})
		}
	}
	return out
}

func (s *Service) checkDisk(ctx context.Context, _ bool) []api.Finding {
	if s.deps.StateDir == "" {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(s.deps.StateDir, &st); err != nil {
		return []api.Finding{{Severity: "warning", Area: "disk", Problem: "the state directory cannot be examined",
			Detail: err.Error(), Fix: "check that " + s.deps.StateDir + " exists"}}
	}
	free := st.Bavail * uint64(st.Bsize)
	total := st.Blocks * uint64(st.Bsize)
	if total == 0 {
		return nil
	}
	frac := float64(free) / float64(total)
	detail := fmt.Sprintf("%s: %d MiB free of %d MiB (%.1f%%)", s.deps.StateDir, free>>20, total>>20, 100*frac)
	fix := "free space on the file system of " + s.deps.StateDir + " (old logs, old backups under backups/); etcd stops writing when its disk is full"
	switch {
	case frac < diskCriticalFraction || free < diskCriticalBytes:
		return []api.Finding{{Severity: "critical", Area: "disk", Problem: "the state directory's disk is nearly full", Detail: detail, Fix: fix}}
	case frac < diskWarnFraction:
		return []api.Finding{{Severity: "warning", Area: "disk", Problem: "the state directory's disk is filling up", Detail: detail, Fix: fix}}
	}
	return nil
}

func (s *Service) checkClock(ctx context.Context, _ bool) []api.Finding {
	var tx unix.Timex
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return nil
	}
	if state == unix.TIME_ERROR || tx.Status&unix.STA_UNSYNC != 0 {
		return []api.Finding{{Severity: "warning", Area: "clock", Problem: "the clock is not synchronised",
			Detail: "the kernel reports the clock unsynchronised (adjtimex)", Fix: "enable NTP: timedatectl set-ntp true, or configure chrony; lease times and logs depend on it"}}
	}
	return nil
}

func (s *Service) checkOLT(ctx context.Context, olt bool) []api.Finding {
	if !olt {
		return nil
	}
	list, err := bus.Invoke(ctx, s.deps.NC, api.OLTsList, &api.None{})
	if err != nil {
		return []api.Finding{{Severity: "warning", Area: "olt", Problem: "the OLT registry cannot be read",
			Detail: err.Error(), Fix: "check that the olt service runs (GET /status)"}}
	}
	// The OLTs are audited concurrently: each is a telnet or SSH session
	// of its own, and one slow OLT must not hide the others.
	results := make([][]api.Finding, len(list.OLTs))
	var wg sync.WaitGroup
	for i, o := range list.OLTs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = s.auditOLT(ctx, o)
		}()
	}
	wg.Wait()
	var out []api.Finding
	for _, r := range results {
		out = append(out, r...)
	}
	return out
}

// checkDrift: the kernel no longer as the stored network configuration
// says (netcfg's GET /network drift, in an operator's words), one finding
// per difference; nothing while no network configuration is stored or
// netcfg does not answer (the services check reports that).
func (s *Service) checkDrift(ctx context.Context, _ bool) []api.Finding {
	n, err := bus.Invoke(ctx, s.deps.NC, api.NetworkGet, &api.None{})
	if err != nil || !n.Managed {
		return nil
	}
	var out []api.Finding
	for _, d := range n.Drift {
		out = append(out, api.Finding{Severity: "warning", Area: "configuration", Problem: "configuration drift: " + d,
			Detail: "the kernel differs from the stored network configuration (version " + n.Version + ")",
			Fix:    "bring the kernel back to the stored configuration, or store what the kernel has: POST /network/plan, then /network/apply with the document you want"})
	}
	return out
}

// oltAudit is the part of the olt service's audit result the doctor reads.
type oltAudit struct {
	SVLAN   int  `json:"svlan"`
	Exists  bool `json:"exists"`
	Uplinks []struct {
		Port  string `json:"port"`
		State string `json:"state"`
	} `json:"uplinks"`
	ServicePorts []struct {
		Index int    `json:"index"`
		State string `json:"state"`
		PON   string `json:"pon"`
		ONTID int    `json:"ont_id"`
	} `json:"service_ports"`
	Option82 bool `json:"option82"`
}

// auditOLT compares what one registered OLT holds for this router (the
// olt service's audit, read only) with what the router expects of it: its
// S-VLAN, an uplink carrying it, option 82 inserted so fibre services'
// addresses can be bound, and the service ports on it up.
func (s *Service) auditOLT(ctx context.Context, o api.OLTRecord) []api.Finding {
	f := func(sev, problem, detail, fix string) api.Finding {
		return api.Finding{Severity: sev, Area: "olt", Problem: "OLT " + o.Name + ": " + problem, Detail: detail, Fix: fix}
	}
	if o.SVLAN == 0 {
		return []api.Finding{f("info", "no S-VLAN is set for this router, so nothing was audited", "",
			"set it: POST /olts/"+o.Name+" {\"svlan\": N}")}
	}
	a, err := bus.Invoke(ctx, s.deps.NC, api.OLTAuditOp, &api.OLTAudit{OLTOptions: api.OLTOptions{OLT: o.Name, Timeout: 40}, SVLAN: o.SVLAN})
	switch {
	case err != nil:
		return []api.Finding{f("critical", "the audit could not be run", err.Error(), "check the olt service and the OLT's registration (GET /olts)")}
	case !a.OK:
		detail := ""
		if a.Error != nil {
			detail = *a.Error
		}
		return []api.Finding{f("critical", fmt.Sprintf("unreachable or refusing (%d)", a.Code), detail,
			fmt.Sprintf("check that %s:%d answers and the stored credentials (POST /olt/info {\"olt\": %q})", o.Host, o.Port, o.Name))}
	}
	var r oltAudit
	if raw, err := json.Marshal(a.Result); err == nil {
		_ = json.Unmarshal(raw, &r)
	}
	if !r.Exists {
		return []api.Finding{f("critical", fmt.Sprintf("S-VLAN %d does not exist on the OLT", o.SVLAN),
			"no fibre subscriber of this router can pass", fmt.Sprintf("create it: POST /olt/vlan-add {\"olt\": %q, \"vlan\": %d}", o.Name, o.SVLAN))}
	}
	var out []api.Finding
	up := 0
	for _, u := range r.Uplinks {
		if !strings.EqualFold(u.State, "down") {
			up++
		}
	}
	switch {
	case len(r.Uplinks) == 0:
		out = append(out, f("critical", fmt.Sprintf("no uplink port carries S-VLAN %d", o.SVLAN),
			"the OLT cannot reach the router", fmt.Sprintf("tag it on the uplink: POST /olt/port-vlan {\"olt\": %q, \"vlan\": %d, \"port\": ...}", o.Name, o.SVLAN)))
	case up == 0:
		out = append(out, f("critical", fmt.Sprintf("every uplink carrying S-VLAN %d is down", o.SVLAN), "", "check the uplink fibre and ports"))
	}
	if !r.Option82 {
		out = append(out, f("warning", "option 82 is not inserted on the S-VLAN",
			"fibre services are bound to their PON port and ONT by option 82; without it they get no fixed address", "enable DHCP option 82 on the OLT (POST /olt/init)"))
	}
	down := 0
	for _, sp := range r.ServicePorts {
		if strings.EqualFold(sp.State, "down") {
			down++
		}
	}
	if down > 0 {
		out = append(out, f("warning", fmt.Sprintf("%d of %d service ports on S-VLAN %d are down", down, len(r.ServicePorts), o.SVLAN),
			"", fmt.Sprintf("list them: POST /olt/serviceports {\"olt\": %q}", o.Name)))
	}
	return out
}

// alertTypes maps a finding's area to the spec's alert type; findings of
// other areas are the doctor's only.
var alertTypes = map[string]string{"dhcp": "dhcp", "interface": "interface", "dhcp-pool": "dhcp-pool",
	"cgnat": "cgnat", "spoof": "spoof", "antispoof": "spoof", "olt": "olt", "fiber": "fiber", "licence": "licence"}

func (s *Service) alerts(ctx context.Context, _ *api.None) (*api.AlertList, error) {
	a := &api.AlertList{Generated: s.deps.Now().Format("2006-01-02 15:04:05"), Alerts: []api.Alert{}}
	for _, f := range s.findings(ctx, false) {
		t, ok := alertTypes[f.Area]
		if !ok || f.Severity == "info" {
			continue
		}
		msg := f.Problem
		if f.Detail != "" {
			msg += ": " + f.Detail
		}
		a.Alerts = append(a.Alerts, api.Alert{Severity: f.Severity, Type: t, Message: msg})
	}
	a.Alerts = append(a.Alerts, s.oltAlerts(ctx)...)
	a.Alerts = append(a.Alerts, s.strangers(ctx)...)
	a.Count = len(a.Alerts)
	return a, nil
}

// strangers are the devices that asked for DHCP without a lease in the
// last hour (device.unknown events), one alert each, at most 50.
func (s *Service) strangers(ctx context.Context) []api.Alert {
	evs, err := recentEvents(ctx, s.deps.NC, event.Subject("dhcp", event.DeviceUnknown), time.Hour, 500)
	if err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []api.Alert
	for i := len(evs) - 1; i >= 0 && len(out) < 50; i-- {
		var d map[string]any
		_ = json.Unmarshal(evs[i].Data, &d)
		who := strings.TrimSpace(fmt.Sprintf("%v %v", d["mac"], d["iface"]))
		if seen[who] {
			continue
		}
		seen[who] = true
		out = append(out, api.Alert{Severity: "info", Type: "stranger",
			Message: fmt.Sprintf("unknown device %v asked for an address on %v at %s", d["mac"], d["iface"], evs[i].Time.Format("15:04:05"))})
	}
	return out
}
