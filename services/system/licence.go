package system

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
	"routerd.dev/shared/licence"
)

// LicenceFile is the router licence in the state directory (shared/licence;
// installed with `routerd licence install`; the olt service reads its
// features).
const LicenceFile = licence.File

// checkLicence: a missing, damaged or expired licence is a licence finding
// (and so a licence alert); one ending within two weeks is a warning.
func (s *Service) checkLicence(ctx context.Context, _ bool) []api.Finding {
	if s.deps.StateDir == "" {
		return nil
	}
	path := licence.Path(s.deps.StateDir)
	finding := func(sev, problem, detail string) []api.Finding {
		return []api.Finding{{Severity: sev, Area: "licence", Problem: problem, Detail: detail,
			Fix: "install the router's licence on its command line: routerd licence install <file> (" + path + "); licensed features such as OLT writes are refused until then"}}
	}
	l, err := licence.Read(s.deps.StateDir)
	switch {
	case errors.Is(err, licence.ErrMissing):
		return finding("warning", "no licence is installed", path+" does not exist")
	case err != nil:
		return finding("warning", "the licence is invalid", err.Error())
	case l.Expires == "":
		return nil
	}
	switch left := l.Ends().Sub(s.deps.Now()); {
	case left <= 0:
		return finding("critical", "the licence has expired", "it expired on "+l.Expires)
	case left < 14*24*time.Hour:
		return finding("warning", "the licence expires soon", fmt.Sprintf("on %s, in %d days", l.Expires, int(left.Hours()/24)))
	}
	return nil
}

// oltAlerts are OLTs unreachable now (olt.unreachable with no
// olt.reachable after it, in the last day) and fibre alerts (ONTs offline
// or with optical power out of range in the last hour, the latest per ONT).
func (s *Service) oltAlerts(ctx context.Context) []api.Alert {
	var out []api.Alert
	evs, err := recentEvents(ctx, s.deps.NC, event.Subject("olt", "olt.*"), 24*time.Hour, 1000)
	if err == nil {
		last := map[string]event.Event{}
		var order []string
		for _, e := range evs {
			var d map[string]any
			_ = json.Unmarshal(e.Data, &d)
			name := fmt.Sprint(d["olt"])
			if _, ok := last[name]; !ok {
				order = append(order, name)
			}
			last[name] = e
		}
		for _, name := range order {
			if e := last[name]; e.Kind == "olt.unreachable" {
				var d map[string]any
				_ = json.Unmarshal(e.Data, &d)
				out = append(out, api.Alert{Severity: "critical", Type: "olt", OLT: name,
					Message: fmt.Sprintf("OLT %s (%v) unreachable since %s: %v", name, d["host"], e.Time.Format("15:04:05"), d["error"])})
			}
		}
	}
	evs, err = recentEvents(ctx, s.deps.NC, event.Subject("olt", "ont.*"), time.Hour, 2000)
	if err != nil {
		return out
	}
	type ontKey struct{ olt, port, id string }
	last := map[ontKey]event.Event{}
	var order []ontKey
	for _, e := range evs {
		var d map[string]any
		_ = json.Unmarshal(e.Data, &d)
		k := ontKey{fmt.Sprint(d["olt"]), fmt.Sprint(d["port"]), fmt.Sprint(d["ont_id"])}
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = e
	}
	for _, k := range order {
		e := last[k]
		var d map[string]any
		_ = json.Unmarshal(e.Data, &d)
		switch e.Kind {
		case "ont.offline":
			out = append(out, api.Alert{Severity: "warning", Type: "fiber", OLT: k.olt, Port: k.port, ONT: k.id,
				Message: fmt.Sprintf("ONT %s on %s port %s offline since %s (%v)", k.id, k.olt, k.port, e.Time.Format("15:04:05"), d["cause"])})
		case "ont.optical":
			out = append(out, api.Alert{Severity: "warning", Type: "fiber", OLT: k.olt, Port: k.port, ONT: k.id,
				Message: fmt.Sprintf("ONT %s on %s port %s receives %v dBm, outside %v..%v", k.id, k.olt, k.port, d["rx_power_dbm"], d["min"], d["max"])})
		}
	}
	return out
}
