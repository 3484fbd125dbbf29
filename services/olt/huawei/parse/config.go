package parse

import (
	"regexp"
	"sort"
	"strings"

	"routerd.dev/services/olt/driver"
)

// ConfigONT is an `ont add` line of the running configuration.
type ConfigONT struct {
	Port        string `json:"port"`
	ID          int    `json:"id"`
	SN          string `json:"sn"`
	LineProfile int    `json:"line_profile"`
	SrvProfile  int    `json:"srv_profile"`
	Description string `json:"description,omitempty"`
}

// Config is what the router needs out of `display current-configuration`.
type Config struct {
	Lines        int                          `json:"lines"`
	Sysname      string                       `json:"sysname,omitempty"`
	VLANs        []int                        `json:"vlans"`
	VLANDesc     map[int]string               `json:"vlan_desc,omitempty"`
	VLANAttr     map[int]string               `json:"vlan_attr,omitempty"`
	UplinkPorts  map[string]driver.UplinkPort `json:"uplink_ports"`
	ServicePorts []driver.ServicePort         `json:"service_ports"`
	ONTs         []ConfigONT                  `json:"onts"`
	NTPServers   []string                     `json:"ntp_servers,omitempty"`
	// AutofindPorts are the PON ports with ONT autofind enabled.
	AutofindPorts []string `json:"autofind_ports,omitempty"`
	Option82      bool     `json:"option82"`
}

var (
	vlanLineRe   = regexp.MustCompile(`^vlan (\d+)(?: to (\d+))? (smart|standard|mux|super)`)
	vlanDescRe   = regexp.MustCompile(`^vlan desc (\d+) description "(.*)"`)
	vlanAttrRe   = regexp.MustCompile(`^vlan attrib (\d+) (\S+)`)
	portVLANRe   = regexp.MustCompile(`^port vlan (\d+)(?: to (\d+))? (\d+/\d+) (\d+)$`)
	ifaceRe      = regexp.MustCompile(`^interface (gpon|mpu|giu|epon|xgpon) (\d+/\d+)`)
	nativeRe     = regexp.MustCompile(`^native-vlan (\d+) vlan (\d+)`)
	cfgONTRe     = regexp.MustCompile(`^ont add (\d+) (\d+) sn-auth "([0-9A-Fa-f]{16})" \S+ ont-lineprofile-id (\d+) ont-srvprofile-id (\d+)(?: desc "(.*)")?`)
	cfgSPRe      = regexp.MustCompile(`^service-port (\d+) vlan (\d+) gpon (\d+/\d+/\d+) ont (\d+) gemport (\d+) multi-service user-vlan (\d+)(.*)$`)
	innerRe      = regexp.MustCompile(`inner-vlan (\d+)`)
	inboundRe    = regexp.MustCompile(`inbound traffic-table index (\d+)`)
	outboundRe   = regexp.MustCompile(`outbound traffic-table index (\d+)`)
	sysnameRe    = regexp.MustCompile(`^sysname (\S+)`)
	ntpServerRe  = regexp.MustCompile(`^ntp-service unicast-server (\S+)`)
	option82On   = regexp.MustCompile(`^dhcp option82 enable|^dhcp-option82 enable|^dhcp option82 (rebuild|forward|on)`)
	cfgTotalLine = regexp.MustCompile(`^\[.*\]$`)
	autofindRe   = regexp.MustCompile(`^port (\d+) ont-auto-find enable`)
)

// configWord reports whether ParseConfig reads lines starting with w.
func configWord(w string) bool {
	switch w {
	case "interface", "sysname", "vlan", "port", "native-vlan", "ont", "service-port", "ntp-service", "dhcp", "dhcp-option82":
		return true
	}
	return false
}

// ParseConfig parses a running configuration (or a section of it).
func ParseConfig(raw string) Config {
	c := Config{VLANs: []int{}, UplinkPorts: map[string]driver.UplinkPort{}, ServicePorts: []driver.ServicePort{},
		ONTs: []ConfigONT{}, VLANDesc: map[int]string{}, VLANAttr: map[int]string{}}
	iface, ifaceKind := "", ""
	tag := func(port string, from, to int) {
		u := c.UplinkPorts[port]
		for v := from; v <= to && v-from < 4094; v++ {
			u.VLANs = append(u.VLANs, v)
		}
		c.UplinkPorts[port] = u
	}
	text, _ := Clean(raw)
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if t == "" || promptRe.MatchString(l) && strings.Contains(l, "display") {
			continue
		}
		c.Lines++
		if t == "#" || cfgTotalLine.MatchString(t) {
			iface = ""
			continue
		}
		// Most lines start with a word no pattern wants: skip them cheaply.
		first, _, _ := strings.Cut(t, " ")
		if !configWord(first) {
			continue
		}
		switch {
		case ifaceRe.MatchString(t):
			m := ifaceRe.FindStringSubmatch(t)
			ifaceKind, iface = m[1], m[2]
		case sysnameRe.MatchString(t):
			c.Sysname = sysnameRe.FindStringSubmatch(t)[1]
		case vlanLineRe.MatchString(t):
			m := vlanLineRe.FindStringSubmatch(t)
			from := atoi(m[1])
			to := atoiOr(m[2], from)
			for v := from; v <= to && v-from < 4094; v++ {
				c.VLANs = append(c.VLANs, v)
			}
		case vlanDescRe.MatchString(t):
			m := vlanDescRe.FindStringSubmatch(t)
			c.VLANDesc[atoi(m[1])] = m[2]
		case vlanAttrRe.MatchString(t):
			m := vlanAttrRe.FindStringSubmatch(t)
			c.VLANAttr[atoi(m[1])] = m[2]
		case portVLANRe.MatchString(t):
			m := portVLANRe.FindStringSubmatch(t)
			from := atoi(m[1])
			tag(m[3]+"/"+m[4], from, atoiOr(m[2], from))
		case nativeRe.MatchString(t) && iface != "" && ifaceKind != "gpon":
			m := nativeRe.FindStringSubmatch(t)
			port := iface + "/" + m[1]
			u := c.UplinkPorts[port]
			u.Native = atoi(m[2])
			c.UplinkPorts[port] = u
		case cfgONTRe.MatchString(t) && iface != "":
			m := cfgONTRe.FindStringSubmatch(t)
			c.ONTs = append(c.ONTs, ConfigONT{Port: iface + "/" + m[1], ID: atoi(m[2]), SN: strings.ToUpper(m[3]),
				LineProfile: atoi(m[4]), SrvProfile: atoi(m[5]), Description: m[6]})
		case cfgSPRe.MatchString(t):
			c.ServicePorts = append(c.ServicePorts, ConfigServicePort(t))
		case autofindRe.MatchString(t) && iface != "" && ifaceKind == "gpon":
			c.AutofindPorts = append(c.AutofindPorts, iface+"/"+autofindRe.FindStringSubmatch(t)[1])
		case ntpServerRe.MatchString(t):
			c.NTPServers = append(c.NTPServers, ntpServerRe.FindStringSubmatch(t)[1])
		case option82On.MatchString(t):
			c.Option82 = true
		}
	}
	for p, u := range c.UplinkPorts {
		sort.Ints(u.VLANs)
		if u.VLANs == nil {
			u.VLANs = []int{}
		}
		c.UplinkPorts[p] = u
	}
	return c
}

// ConfigServicePort parses one `service-port N vlan ...` configuration
// line; the state is unknown from configuration and left empty.
func ConfigServicePort(line string) driver.ServicePort {
	m := cfgSPRe.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return driver.ServicePort{}
	}
	sp := driver.ServicePort{Index: atoi(m[1]), VLAN: atoi(m[2]), PON: m[3], ONTID: atoi(m[4]), Gem: atoi(m[5]),
		FlowType: "vlan", UserVLAN: atoi(m[6]), Car: driver.Car{In: -1, Out: -1}}
	rest := m[7]
	if i := innerRe.FindStringSubmatch(rest); i != nil {
		sp.InnerVLAN = atoi(i[1])
	}
	if i := inboundRe.FindStringSubmatch(rest); i != nil {
		sp.Car.In = atoi(i[1])
	}
	if i := outboundRe.FindStringSubmatch(rest); i != nil {
		sp.Car.Out = atoi(i[1])
	}
	return sp
}

// Exchange is one prompt-command-answer step of a captured session.
type Exchange struct {
	Prompt  string `json:"prompt"`
	Mode    string `json:"mode"`
	Command string `json:"command"`
	Error   string `json:"error,omitempty"`
	Lines   int    `json:"lines"`
}

var sessionPromptRe = regexp.MustCompile(`^\s*([A-Za-z0-9_\-.]+)(\([A-Za-z0-9_\-/.]+\))?([>#])(.*)$`)

// Mode names the CLI mode a prompt shows: user, privileged, or the text in
// parentheses (config, config-if-gpon-0/1, ...).
func Mode(prompt string) string {
	m := sessionPromptRe.FindStringSubmatch(prompt)
	if m == nil {
		return ""
	}
	if m[2] != "" {
		return strings.Trim(m[2], "()")
	}
	if m[3] == ">" {
		return "user"
	}
	return "privileged"
}

// ParseSession splits a captured session at its prompts.
func ParseSession(raw string) []Exchange {
	out := []Exchange{}
	text, _ := Clean(raw)
	var cur *Exchange
	var body []string
	flush := func() {
		if cur != nil {
			cur.Error = Error(strings.Join(body, "\n"))
			cur.Lines = len(body)
			out = append(out, *cur)
		}
	}
	for _, l := range strings.Split(text, "\n") {
		if m := sessionPromptRe.FindStringSubmatch(l); m != nil && (m[2] != "" || strings.HasPrefix(l, m[1])) &&
			!strings.Contains(m[1], "--") {
			flush()
			cur = &Exchange{Prompt: m[1] + m[2] + m[3], Mode: Mode(m[1] + m[2] + m[3]), Command: strings.TrimSpace(m[4])}
			body = nil
			continue
		}
		if strings.TrimSpace(l) != "" {
			body = append(body, l)
		}
	}
	flush()
	return out
}
