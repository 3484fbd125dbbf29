package parse

import (
	"regexp"
	"strings"

	"routerd.dev/services/olt/driver"
)

// KV is one `key : value` line.
type KV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

var kvRe = regexp.MustCompile(`^\s*([A-Za-z][A-Za-z0-9 /()\-_.'%]*?)\s*:\s?(.*)$`)

// KeyValues returns every `key : value` line of raw in order. Blocks the
// OLT separates with dashed lines are returned as separate groups.
func KeyValues(raw string) [][]KV {
	var groups [][]KV
	var cur []KV
	flush := func() {
		if len(cur) > 0 {
			groups = append(groups, cur)
			cur = nil
		}
	}
	for _, l := range lines(raw) {
		if isRule(l) {
			flush()
			continue
		}
		if promptRe.MatchString(l) && !strings.Contains(l, " : ") {
			continue
		}
		m := kvRe.FindStringSubmatch(l)
		if m == nil {
			// A continuation of a wrapped value: indented text, no key.
			if len(cur) > 0 && strings.HasPrefix(l, "    ") {
				cur[len(cur)-1].Value += strings.TrimSpace(l)
			}
			continue
		}
		cur = append(cur, KV{Key: strings.TrimSpace(m[1]), Value: strings.TrimSpace(m[2])})
	}
	flush()
	return groups
}

// kvMap flattens the groups into a map; the first occurrence of a key wins.
func kvMap(groups [][]KV) map[string]string {
	m := map[string]string{}
	for _, g := range groups {
		for _, kv := range g {
			if _, ok := m[kv.Key]; !ok {
				m[kv.Key] = kv.Value
			}
		}
	}
	return m
}

// Version is what `display version` (and `display sysuptime`) tell.
type Version struct {
	Product string `json:"product"`
	Version string `json:"version"`
	Patch   string `json:"patch"`
	Uptime  string `json:"uptime"`
}

var uptimeRe = regexp.MustCompile(`(?:Uptime is|System up time:)\s*(.+?)\s*$`)

// ParseVersion parses `display version`.
func ParseVersion(raw string) Version {
	var v Version
	for _, l := range lines(raw) {
		if m := uptimeRe.FindStringSubmatch(l); m != nil {
			v.Uptime = m[1]
			continue
		}
		m := kvRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		switch strings.TrimSpace(m[1]) {
		case "VERSION":
			v.Version = strings.TrimSpace(m[2])
		case "PATCH":
			v.Patch = strings.TrimSpace(m[2])
		case "PRODUCT":
			v.Product = strings.TrimSpace(m[2])
		}
	}
	return v
}

// ParseAutofind parses `display ont autofind all` (or of one port).
func ParseAutofind(raw string) []driver.AutofindONT {
	out := []driver.AutofindONT{}
	for _, g := range KeyValues(raw) {
		m := map[string]string{}
		for _, kv := range g {
			m[kv.Key] = kv.Value
		}
		sn := firstField(m["Ont SN"])
		if sn == "" {
			continue
		}
		port, _ := FSP(m["F/S/P"])
		out = append(out, driver.AutofindONT{
			Port: port, SN: sn, Vendor: m["VendorID"], Version: m["Ont Version"],
			SoftwareVersion: m["Ont SoftwareVersion"], EquipmentID: m["Ont EquipmentID"],
			MAC: m["Ont MAC"], Seen: m["Ont autofind time"],
		})
	}
	return out
}

func firstField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// ONTDetail is `display ont info F S P ID` or `display ont info by-sn`.
type ONTDetail struct {
	driver.ONT
	DistanceM       *int   `json:"distance_m,omitempty"`
	LastDownCause   string `json:"last_down_cause,omitempty"`
	LastUpTime      string `json:"last_up_time,omitempty"`
	LineProfileID   *int   `json:"line_profile_id,omitempty"`
	LineProfileName string `json:"line_profile_name,omitempty"`
	SrvProfileID    *int   `json:"srv_profile_id,omitempty"`
	SrvProfileName  string `json:"srv_profile_name,omitempty"`
}

// ParseONTDetail parses the key-value detail of one ONT. A description the
// OLT wrapped at a fixed column is joined back.
func ParseONTDetail(raw string) (ONTDetail, bool) {
	m := kvMap(KeyValues(raw))
	id := intPtr(m["ONT-ID"])
	if id == nil {
		return ONTDetail{}, false
	}
	port, _ := FSP(m["F/S/P"])
	d := ONTDetail{
		ONT: driver.ONT{Port: port, ID: *id, SN: firstField(m["SN"]), Control: m["Control flag"],
			RunState: m["Run state"], ConfigState: m["Config state"], MatchState: m["Match state"],
			Description: m["Description"]},
		DistanceM: intPtr(m["ONT distance(m)"]), LastDownCause: m["Last down cause"], LastUpTime: m["Last up time"],
		LineProfileID: intPtr(m["Line profile ID"]), LineProfileName: m["Line profile name"],
		SrvProfileID: intPtr(m["Service profile ID"]), SrvProfileName: m["Service profile name"],
	}
	return d, true
}

// ParseONTOpticalDetail parses `display ont optical-info P ID`.
func ParseONTOpticalDetail(raw string, id int) (driver.ONTOptical, bool) {
	m := kvMap(KeyValues(raw))
	rx := floatPtr(m["Rx optical power(dBm)"])
	if rx == nil && m["Rx optical power(dBm)"] == "" {
		return driver.ONTOptical{}, false
	}
	return driver.ONTOptical{ID: id, RxPowerDBm: rx, TxPowerDBm: floatPtr(m["Tx optical power(dBm)"]),
		OLTRxDBm: floatPtr(m["OLT Rx ONT optical power(dBm)"]), TemperatureC: floatPtr(m["Temperature(C)"]),
		VoltageV: floatPtr(m["Voltage(V)"]), CurrentMA: floatPtr(m["Laser bias current(mA)"])}, true
}

// ParsePortOptical parses the port state block `display port state P` of
// a GPON interface.
func ParsePortOptical(raw string) []driver.PortOptical {
	out := []driver.PortOptical{}
	for _, g := range KeyValues(raw) {
		m := map[string]string{}
		for _, kv := range g {
			m[kv.Key] = kv.Value
		}
		port, ok := FSP(m["F/S/P"])
		if !ok {
			continue
		}
		p := driver.PortOptical{Port: port, Module: m["Optical Module status"]}
		for k, dst := range map[string]*float64{"TX power(dBm)": &p.TxPowerDBm, "Temperature(C)": &p.TemperatureC,
			"Supply Voltage(V)": &p.VoltageV, "TX Bias current(mA)": &p.BiasMA} {
			if f := floatPtr(m[k]); f != nil {
				*dst = *f
			}
		}
		out = append(out, p)
	}
	return out
}

// ParseCounters parses a statistics block into snake_case counter names.
func ParseCounters(raw string) map[string]int64 {
	out := map[string]int64{}
	for _, g := range KeyValues(raw) {
		for _, kv := range g {
			if n := intPtr(kv.Value); n != nil {
				out[snake(kv.Key)] = int64(*n)
			}
		}
	}
	return out
}

func snake(s string) string {
	var b strings.Builder
	under := false
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			if under && b.Len() > 0 {
				b.WriteByte('_')
			}
			under = false
			b.WriteRune(r)
		} else {
			under = true
		}
	}
	return b.String()
}
