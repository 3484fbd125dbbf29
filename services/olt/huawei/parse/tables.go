package parse

import (
	"regexp"
	"strings"

	"routerd.dev/services/olt/driver"
)

// Rows are parsed from whitespace-separated fields rather than fixed
// columns: the paging erase residue and cursor codes can shift a row right,
// and README or note indentation shifts whole captures.

// ParseBoards parses `display board 0`. Empty slots are left out.
func ParseBoards(raw string) []driver.Board {
	out := []driver.Board{}
	for _, l := range lines(raw) {
		f := strings.Fields(l)
		if len(f) < 3 || !isInt(f[0]) {
			continue
		}
		b := driver.Board{Slot: atoi(f[0]), Board: f[1], Status: f[2]}
		for _, x := range f[3:] {
			switch {
			case x == "Online" || x == "Offline":
				b.Online = x
			case b.SubType0 == "":
				b.SubType0 = x
			default:
				b.SubType1 = x
			}
		}
		out = append(out, b)
	}
	return out
}

// BoardPorts is `display board F/S` of a PON board.
type BoardPorts struct {
	Board  string           `json:"board"`
	Status string           `json:"status"`
	Ports  []driver.PONPort `json:"ports"`
}

// ParseBoardPorts parses `display board F/S`; slotPrefix ("0/6") is put in
// front of the port numbers.
func ParseBoardPorts(raw, slotPrefix string) BoardPorts {
	bp := BoardPorts{Ports: []driver.PONPort{}}
	for _, l := range lines(raw) {
		if m := kvRe.FindStringSubmatch(l); m != nil {
			switch strings.TrimSpace(m[1]) {
			case "Board Name":
				bp.Board = strings.TrimSpace(m[2])
			case "Board Status":
				bp.Status = strings.TrimSpace(m[2])
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) != 5 || !isInt(f[0]) || !isInt(f[2]) || !isInt(f[3]) {
			continue
		}
		bp.Ports = append(bp.Ports, driver.PONPort{Port: slotPrefix + "/" + f[0], Type: f[1],
			MinDistanceKM: atoi(f[2]), MaxDistanceKM: atoi(f[3]), OpticalModule: f[4]})
	}
	return bp
}

func isInt(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// ONTTable is `display ont info F S P all` or `display ont info 0 all`.
type ONTTable struct {
	ONTs   []driver.ONT `json:"onts"`
	Total  int          `json:"total"`
	Online int          `json:"online"`
}

var (
	// The SN is 16 characters: hex on devices, any letters in the
	// anonymised captures of ntc-templates.
	ontRowRe  = regexp.MustCompile(`^\s*(\d+\s*/\s*\d+\s*/\s*\d+)\s+(\d+)\s+([0-9A-Za-z]{16})\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)`)
	descRowRe = regexp.MustCompile(`^\s*(\d+\s*/\s*\d+\s*/\s*\d+)\s+(\d+)\s+(.*?)\s*$`)
	// Firmware says "the total of ONTs are", "the total number of ONTs
	// are" or "... is", some with ", offline: N" after.
	totalRe = regexp.MustCompile(`In port (\d+\s*/\s*\d+\s*/\s*\d+)\s*, the total (?:number )?of ONTs (?:are|is):\s*(\d+), online:\s*(\d+)`)
)

// ParseONTTable parses the state table, the description table (joining
// wrapped descriptions) and the per-port totals.
func ParseONTTable(raw string) ONTTable {
	t := ONTTable{ONTs: []driver.ONT{}}
	idx := map[string]int{}
	segs := map[int][]descSeg{}
	inDesc := false
	last := -1
	for _, l := range lines(raw) {
		if m := totalRe.FindStringSubmatch(l); m != nil {
			t.Total += atoi(m[2])
			t.Online += atoi(m[3])
			inDesc = false
			continue
		}
		if strings.Contains(l, "Description") && strings.Contains(l, "F/S/P") {
			inDesc, last = true, -1
			continue
		}
		if isRule(l) {
			last = -1
			continue
		}
		if !inDesc {
			if m := ontRowRe.FindStringSubmatch(l); m != nil {
				port, _ := FSP(m[1])
				o := driver.ONT{Port: port, ID: atoi(m[2]), SN: strings.ToUpper(m[3]), Control: m[4],
					RunState: m[5], ConfigState: m[6], MatchState: m[7]}
				idx[port+"#"+m[2]] = len(t.ONTs)
				t.ONTs = append(t.ONTs, o)
			}
			continue
		}
		if m := descRowRe.FindStringSubmatchIndex(l); m != nil {
			port, _ := FSP(l[m[2]:m[3]])
			if i, ok := idx[port+"#"+l[m[4]:m[5]]]; ok {
				segs[i] = []descSeg{{text: l[m[6]:m[7]], col: m[6]}}
				last = i
			}
			continue
		}
		if last >= 0 && !strings.Contains(l, "ID") && strings.TrimSpace(l) != "" {
			segs[last] = append(segs[last], descSeg{text: strings.TrimSpace(l), lead: len(l) - len(strings.TrimLeft(l, " ")), cont: true})
		}
	}
	joinDescriptions(t.ONTs, segs)
	return t
}

// descSeg is one printed piece of a description the OLT wrapped.
type descSeg struct {
	text string
	lead int  // blanks before it on its line (continuations)
	cont bool // a continuation line
	col  int  // the column the description starts at (first pieces)
}

// joinDescriptions rebuilds wrapped descriptions. The OLT wraps at a fixed
// width, and the blank that fell at the wrap point is printed at the end
// of a piece (and trimmed with the line) or at the start of the next one
// (one more blank of indentation): a piece shorter than the width had
// trailing blanks, a continuation indented more than the others had
// leading ones.
//
// Continuations are printed under the description's first character (as
// the device prints the wrapped values of its detail view): a piece
// indented one more had a leading blank. When they are printed left of
// it, the least indented continuation is taken as the column instead.
func joinDescriptions(onts []driver.ONT, segs map[int][]descSeg) {
	minLead, col := -1, -1
	for _, ss := range segs {
		for _, sg := range ss {
			if sg.cont && (minLead < 0 || sg.lead < minLead) {
				minLead = sg.lead
			}
			if !sg.cont && (col < 0 || sg.col < col) {
				col = sg.col
			}
		}
	}
	if col >= 0 && minLead >= col {
		minLead = col
	}
	printed := func(sg descSeg) int { return leadOf(sg, minLead) + len(sg.text) }
	width := 0
	for _, ss := range segs {
		for k := 0; k < len(ss)-1; k++ {
			width = max(width, printed(ss[k]))
		}
	}
	for i, ss := range segs {
		var b strings.Builder
		for k, sg := range ss {
			b.WriteString(strings.Repeat(" ", leadOf(sg, minLead)))
			b.WriteString(sg.text)
			if k < len(ss)-1 {
				b.WriteString(strings.Repeat(" ", max(0, width-printed(sg))))
			}
		}
		onts[i].Description = b.String()
	}
}

func leadOf(sg descSeg, minLead int) int {
	if !sg.cont {
		return 0
	}
	return max(0, sg.lead-minLead)
}

// SummaryONT is one ONT of `display ont info summary F/S/P`.
type SummaryONT struct {
	ID          int      `json:"id"`
	RunState    string   `json:"run_state"`
	LastUp      string   `json:"last_up,omitempty"`
	LastDown    string   `json:"last_down,omitempty"`
	DownCause   string   `json:"down_cause,omitempty"`
	SN          string   `json:"sn"`
	Type        string   `json:"type"`
	DistanceM   *int     `json:"distance_m"`
	RxDBm       *float64 `json:"rx_dbm"`
	TxDBm       *float64 `json:"tx_dbm"`
	Description string   `json:"description"`
}

// Summary is `display ont info summary F/S/P`.
type Summary struct {
	Port   string       `json:"port"`
	Total  int          `json:"total"`
	Online int          `json:"online"`
	ONTs   []SummaryONT `json:"onts"`
}

// ParseSummary parses both tables of the summary and merges them by ONT id.
func ParseSummary(raw string) Summary {
	s := Summary{ONTs: []SummaryONT{}}
	idx := map[int]int{}
	second := false
	for _, l := range lines(raw) {
		if m := totalRe.FindStringSubmatch(l); m != nil {
			s.Port, _ = FSP(m[1])
			s.Total, s.Online = atoi(m[2]), atoi(m[3])
			continue
		}
		if strings.Contains(l, "Rx/Tx power") {
			second = true
			continue
		}
		f := strings.Fields(l)
		if len(f) < 2 || !isInt(f[0]) {
			continue
		}
		id := atoi(f[0])
		if !second {
			o := SummaryONT{ID: id, RunState: f[1]}
			rest := f[2:]
			take := func() string {
				if len(rest) == 0 {
					return ""
				}
				if rest[0] == "-" {
					rest = rest[1:]
					return ""
				}
				if len(rest) >= 2 {
					v := rest[0] + " " + rest[1]
					rest = rest[2:]
					return v
				}
				v := rest[0]
				rest = rest[1:]
				return v
			}
			o.LastUp, o.LastDown = take(), take()
			if c := strings.Join(rest, " "); c != "-" {
				o.DownCause = c
			}
			idx[id] = len(s.ONTs)
			s.ONTs = append(s.ONTs, o)
			continue
		}
		if len(f) < 5 {
			continue
		}
		i, ok := idx[id]
		if !ok {
			idx[id] = len(s.ONTs)
			s.ONTs = append(s.ONTs, SummaryONT{ID: id})
			i = idx[id]
		}
		o := &s.ONTs[i]
		o.SN, o.Type, o.DistanceM = f[1], f[2], intPtr(f[3])
		if rx, tx, ok := strings.Cut(f[4], "/"); ok {
			o.RxDBm, o.TxDBm = floatPtr(rx), floatPtr(tx)
		}
		o.Description = strings.Join(f[5:], " ")
	}
	return s
}

// ParseONTOptical parses `display ont optical-info P all`.
func ParseONTOptical(raw string) []driver.ONTOptical {
	out := []driver.ONTOptical{}
	for _, l := range lines(raw) {
		f := strings.Fields(l)
		if len(f) < 6 || !isInt(f[0]) {
			continue
		}
		o := driver.ONTOptical{ID: atoi(f[0]), RxPowerDBm: floatPtr(f[1]), TxPowerDBm: floatPtr(f[2]),
			OLTRxDBm: floatPtr(f[3]), TemperatureC: floatPtr(f[4]), VoltageV: floatPtr(f[5])}
		if len(f) > 6 {
			o.CurrentMA = floatPtr(f[6])
		}
		if len(f) > 7 {
			o.DistanceM = intPtr(f[7])
		}
		out = append(out, o)
	}
	return out
}

// ServicePortTable is `display service-port ...`.
type ServicePortTable struct {
	ServicePorts []driver.ServicePort `json:"service_ports"`
	Total        int                  `json:"total"`
}

var (
	spRowRe   = regexp.MustCompile(`^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\d+\s*/\s*\d+\s*/\s*\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*$`)
	spTotalRe = regexp.MustCompile(`Total\s*:\s*(\d+)`)
)

// ParseServicePorts parses the Switch-Oriented Flow List.
func ParseServicePorts(raw string) ServicePortTable {
	t := ServicePortTable{ServicePorts: []driver.ServicePort{}}
	for _, l := range lines(raw) {
		if m := spTotalRe.FindStringSubmatch(l); m != nil {
			t.Total = atoi(m[1])
			continue
		}
		m := spRowRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		pon, _ := FSP(m[5])
		t.ServicePorts = append(t.ServicePorts, driver.ServicePort{
			Index: atoi(m[1]), VLAN: atoi(m[2]), Attr: m[3], Type: m[4], PON: pon,
			ONTID: atoiOr(m[6], -1), Gem: atoiOr(m[7], -1), FlowType: m[8], UserVLAN: atoiOr(m[9], 0),
			Car: driver.Car{In: atoiOr(m[10], -1), Out: atoiOr(m[11], -1)}, State: m[12],
		})
	}
	return t
}

// ParseVLANs parses `display vlan all`.
func ParseVLANs(raw string) []driver.VLAN {
	out := []driver.VLAN{}
	for _, l := range lines(raw) {
		f := strings.Fields(l)
		if len(f) < 5 || !isInt(f[0]) || isInt(f[1]) {
			continue
		}
		out = append(out, driver.VLAN{ID: atoi(f[0]), Type: f[1], Attribute: f[2],
			StandardPort: atoi(f[3]), ServicePorts: atoi(f[4])})
	}
	return out
}

// ParseDBAProfiles parses `display dba-profile all`.
func ParseDBAProfiles(raw string) []driver.DBAProfile {
	out := []driver.DBAProfile{}
	for _, l := range lines(raw) {
		f := strings.Fields(l)
		if len(f) != 7 || !isInt(f[0]) || !isInt(f[1]) {
			continue
		}
		out = append(out, driver.DBAProfile{ID: atoi(f[0]), Type: atoi(f[1]), Fix: atoi(f[3]),
			Assure: atoi(f[4]), Max: atoi(f[5]), Bindings: atoi(f[6])})
	}
	return out
}

// ParseProfiles parses `display ont-lineprofile gpon all` and
// `display ont-srvprofile gpon all`.
func ParseProfiles(raw string) []driver.Profile {
	out := []driver.Profile{}
	for _, l := range lines(raw) {
		f := strings.Fields(l)
		if len(f) < 3 || !isInt(f[0]) || !isInt(f[len(f)-1]) {
			continue
		}
		out = append(out, driver.Profile{ID: atoi(f[0]), Name: strings.Join(f[1:len(f)-1], " "),
			Bindings: atoi(f[len(f)-1])})
	}
	return out
}

// ParseTrafficTables parses `display traffic table ip from-index N`.
func ParseTrafficTables(raw string) []driver.TrafficTable {
	out := []driver.TrafficTable{}
	for _, l := range lines(raw) {
		f := strings.Fields(l)
		if len(f) < 8 || !isInt(f[0]) || !isInt(f[5]) {
			continue
		}
		out = append(out, driver.TrafficTable{Index: atoi(f[0]), CIR: atoiOr(f[1], -1), CBS: atoiOr(f[2], -1),
			PIR: atoiOr(f[3], -1), PBS: atoiOr(f[4], -1), Pri: atoi(f[5])})
	}
	return out
}

var (
	ttIndexRe  = regexp.MustCompile(`Traffic Table Index\s*:\s*(\d+)`)
	ttNameRe   = regexp.MustCompile(`Traffic Table Name\s*:\s*(\S+)`)
	ontAddRe   = regexp.MustCompile(`(?:PortID\s*:\s*(\d+)\s*,\s*)?ONTID\s*:\s*(\d+)`)
	countRe    = regexp.MustCompile(`Number of ONTs that can be (added|deleted):\s*(\d+),\s*success:\s*(\d+)`)
	spDeleteRe = regexp.MustCompile(`which have been\s+deleted:\s*(\d+)`)
)

// TrafficTableCreated parses the answer to `traffic table ip ...`.
func TrafficTableCreated(raw string) (index int, name string, ok bool) {
	text, _ := Clean(raw)
	m := ttIndexRe.FindStringSubmatch(text)
	if m == nil {
		return 0, "", false
	}
	if n := ttNameRe.FindStringSubmatch(text); n != nil {
		name = n[1]
	}
	return atoi(m[1]), name, true
}

// ONTAdded is the answer to `ont add`. MA5800 and MA5608T firmware print
// the count line and `PortID :P, ONTID :N`; MA5683T prints only `ONTID :N`.
type ONTAdded struct {
	Port    *int `json:"port,omitempty"`
	ONTID   int  `json:"ont_id"`
	Success *int `json:"success,omitempty"`
}

// ParseONTAdded parses the answer to `ont add`.
func ParseONTAdded(raw string) (ONTAdded, bool) {
	text, _ := Clean(raw)
	m := ontAddRe.FindStringSubmatch(text)
	if m == nil {
		return ONTAdded{}, false
	}
	a := ONTAdded{ONTID: atoi(m[2]), Port: intPtr(m[1])}
	if c := countRe.FindStringSubmatch(text); c != nil {
		a.Success = intPtr(c[3])
	}
	return a, true
}

// Count parses `Number of ONTs that can be added|deleted: N, success: M`
// and the deletion counter of `undo service-port`; ok is false when the
// answer holds neither.
func Count(raw string) (success int, ok bool) {
	text, _ := Clean(raw)
	if m := countRe.FindStringSubmatch(text); m != nil {
		return atoi(m[3]), true
	}
	if m := spDeleteRe.FindStringSubmatch(text); m != nil {
		return atoi(m[1]), true
	}
	return 0, false
}
