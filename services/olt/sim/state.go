package sim

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"time"
)

// Model selects the firmware whose answers the simulator reproduces where
// they differ between releases (the answer to `ont add`, `display version`).
type Model string

// Models the simulator knows.
const (
	MA5800  Model = "MA5800-X7"
	MA5608T Model = "MA5608T"
	MA5683T Model = "MA5683T"
)

// AutofindONT is an ONT plugged into a PON port and not yet registered.
type AutofindONT struct {
	Port        string // "0/1/0"
	SN          string // 16 hex digits
	Vendor      string // default from the SN's first 8 hex digits
	EquipmentID string // default EG8145V5
	Seen        time.Time
}

type ont struct {
	id          int
	sn          string
	lineProfile int
	srvProfile  int
	desc        string
	active      bool
	online      bool
	downCause   string      // last down cause shown by display ont info (LOS, dying-gasp)
	natives     map[int]int // eth port -> native VLAN
	added       time.Time
}

type ponPort struct {
	autofindOn bool
	onts       map[int]*ont
}

type vlan struct {
	typ, attr, desc string
}

type dbaProfile struct {
	name string
	typ  int
	fix  int
	max  int
}

type lineProfile struct {
	name  string
	tcont map[int]int // tcont -> dba profile
	gems  map[int]int // gem -> mapped VLAN
}

type srvProfile struct {
	name     string
	ethPorts int
	vlans    map[int]int // eth port -> VLAN
}

type trafficTable struct {
	name     string
	cir, pir int // -1 for off
	pri      int
	policy   string // tag-pri (the factory tables) or local-pri
}

type servicePort struct {
	vlan      int
	pon       string
	ont, gem  int
	userVLAN  int
	transform string
	inner     int
	in, out   int
}

// state is one OLT's data. Every access holds OLT.mu.
type state struct {
	sysname    string
	ports      map[string]*ponPort
	autofind   []AutofindONT
	vlans      map[int]*vlan
	uplinks    map[string]map[int]bool
	natives    map[string]int
	dba        map[int]*dbaProfile
	lines      map[int]*lineProfile
	srvs       map[int]*srvProfile
	tables     map[int]*trafficTable
	sps        map[int]*servicePort
	ntp        []string
	igmpUsers  map[int]bool         // service-ports that are IGMP users
	mvlans     map[int]map[int]bool // multicast VLAN -> member service-ports
	saved      bool
	start      time.Time
	gponSlots  []int
	uplinkSlot []int
}

func newState(name string, now time.Time) *state {
	s := &state{
		sysname: name, ports: map[string]*ponPort{}, vlans: map[int]*vlan{1: {typ: "smart", attr: "common"}},
		uplinks: map[string]map[int]bool{}, natives: map[string]int{}, dba: map[int]*dbaProfile{},
		lines: map[int]*lineProfile{}, srvs: map[int]*srvProfile{}, tables: map[int]*trafficTable{},
		sps: map[int]*servicePort{}, igmpUsers: map[int]bool{}, mvlans: map[int]map[int]bool{}, start: now, gponSlots: []int{1, 2}, uplinkSlot: []int{3, 4},
	}
	for _, sl := range s.gponSlots {
		for p := range 16 {
			s.ports[fmt.Sprintf("0/%d/%d", sl, p)] = &ponPort{autofindOn: true, onts: map[int]*ont{}}
		}
	}
	for _, sl := range s.uplinkSlot {
		for p := range 4 {
			port := fmt.Sprintf("0/%d/%d", sl, p)
			s.uplinks[port] = map[int]bool{1: true}
			s.natives[port] = 1
		}
	}
	// The factory defaults of a SmartAX OLT.
	s.dba[0] = &dbaProfile{name: "dba-profile_0", typ: 3, max: 20480}
	s.dba[1] = &dbaProfile{name: "dba-profile_1", typ: 1, fix: 5120}
	s.dba[2] = &dbaProfile{name: "dba-profile_2", typ: 1, fix: 1024}
	s.lines[0] = &lineProfile{name: "line-profile_default_0", tcont: map[int]int{0: 2, 1: 0}, gems: map[int]int{}}
	s.srvs[0] = &srvProfile{name: "srv-profile_default_0", vlans: map[int]int{}}
	for i := 0; i <= 6; i++ {
		s.tables[i] = &trafficTable{name: fmt.Sprintf("ip-traffic-table_%d", i), cir: -1, pir: -1, pri: 0, policy: "tag-pri"}
	}
	s.tables[0].cir, s.tables[0].pir, s.tables[0].pri = 1024, 2048, 6
	return s
}

func (s *state) port(fsp string) *ponPort { return s.ports[fsp] }

// ontBySN finds a registered ONT by serial.
func (s *state) ontBySN(sn string) (string, *ont) {
	for name, p := range s.ports {
		for _, o := range p.onts {
			if o.sn == sn {
				return name, o
			}
		}
	}
	return "", nil
}

func (s *state) nextFree(m map[int]bool, from, max int) int {
	for i := from; i <= max; i++ {
		if !m[i] {
			return i
		}
	}
	return -1
}

func (s *state) nextServicePort() int {
	used := map[int]bool{}
	for i := range s.sps {
		used[i] = true
	}
	return s.nextFree(used, 0, 65535)
}

func (s *state) nextTrafficTable() int {
	used := map[int]bool{}
	for i := range s.tables {
		used[i] = true
	}
	return s.nextFree(used, 10, 65535)
}

func (s *state) servicePortsOf(pon string, id int) []int {
	var out []int
	for i, sp := range s.sps {
		if sp.pon == pon && sp.ont == id {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}

func sortedKeys[V any](m map[int]V) []int {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}

func sortedPorts[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		var a, b [3]int
		fmt.Sscanf(keys[i], "%d/%d/%d", &a[0], &a[1], &a[2])
		fmt.Sscanf(keys[j], "%d/%d/%d", &b[0], &b[1], &b[2])
		return a[0]*1e6+a[1]*1e3+a[2] < b[0]*1e6+b[1]*1e3+b[2]
	})
	return keys
}

// wobble is a reading that moves slowly over time around base, different
// for every key, so optical values and counters look alive and two reads a
// minute apart differ.
func wobble(key string, base, amp float64, since time.Duration) float64 {
	h := fnv.New32a()
	h.Write([]byte(key))
	phase := float64(h.Sum32()%1000) / 1000 * 2 * math.Pi
	v := base + amp*math.Sin(phase+since.Seconds()/60)
	return math.Round(v*100) / 100
}

// counter grows with time at a per-key rate.
func counter(key string, rate float64, since time.Duration) int64 {
	h := fnv.New32a()
	h.Write([]byte(key))
	r := rate * (0.5 + float64(h.Sum32()%1000)/1000)
	return int64(r*since.Seconds()) + int64(h.Sum32()%100000)
}
