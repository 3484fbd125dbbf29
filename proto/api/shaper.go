package api

import "time"

// The shaper service: traffic control on subscriber-facing interfaces,
// holding each subscriber to its plan's rates. It has no HTTP operations of
// its own; the subscribers service (clients, fibre services) asks it on the
// bus. The shaper stores what it applies under /router/shaper/ and
// reconciles the kernel with that at start.

// Shape is one subscriber held to its plan's rates on its interface.
type Shape struct {
	ID       string `json:"id" api:"required" doc:"the subscriber: a client's MAC or a fibre service's id"`
	IP       string `json:"ip" api:"required,format=ipv4"`
	Prefix6  string `json:"prefix6" api:"format=cidr" doc:"IPv6 address or delegated prefix shaped with the IPv4 address"`
	Iface    string `json:"iface" api:"required"`
	Plan     string `json:"plan" api:"required" doc:"plan name: ShaperPlan reshapes every subscriber of it"`
	DownMbps int64  `json:"down_mbps" api:"required,min=1,max=100000"`
	UpMbps   int64  `json:"up_mbps" api:"required,min=1,max=100000"`
}

// ShapeRef names one shaped subscriber.
type ShapeRef struct {
	ID string `json:"id" api:"required"`
}

// ShapeAnswer answers a change of one subscriber's shaping.
type ShapeAnswer struct {
	Result
	Shape *Shape `json:"shape,omitempty"`
}

// PlanRates are a plan's new rates for every subscriber shaped by it.
type PlanRates struct {
	Plan     string `json:"plan" api:"required"`
	DownMbps int64  `json:"down_mbps" api:"required,min=1,max=100000"`
	UpMbps   int64  `json:"up_mbps" api:"required,min=1,max=100000"`
}

// PlanRatesAnswer says how many subscribers were reshaped.
type PlanRatesAnswer struct {
	Result
	Reshaped int `json:"reshaped"`
}

// ShapePageRequest pages the shaped subscribers in id order.
type ShapePageRequest struct {
	After string `json:"after"`
	Limit int    `json:"limit" api:"min=1,max=10000,default=5000"`
}

// ShapePage is one page of shaped subscribers.
type ShapePage struct {
	Count  int     `json:"count"`
	Shapes []Shape `json:"shapes"`
	Next   string  `json:"next,omitempty"`
}

// ShapeCounter is what the kernel has counted for one shaped subscriber:
// its download class on its interface and its upload police rule. The
// counters start at zero when the subscriber's class or rule is made and
// only grow while it stays; a reader taking rates compares two pages and
// takes a smaller value as a restart.
type ShapeCounter struct {
	ID          string `json:"id" doc:"the subscriber: a client's MAC or a fibre service's id"`
	IP          string `json:"ip"`
	Iface       string `json:"iface"`
	Plan        string `json:"plan"`
	DownBytes   uint64 `json:"down_bytes" doc:"bytes sent to the subscriber (its class)"`
	DownPackets uint64 `json:"down_packets"`
	DownDrops   uint64 `json:"down_drops" doc:"packets its class dropped"`
	UpBytes     uint64 `json:"up_bytes" doc:"bytes from the subscriber within its rate (its police rule)"`
	UpPackets   uint64 `json:"up_packets"`
}

// ShapeCounterPage is one page of shaped subscribers' counters, in id
// order, read at one time.
type ShapeCounterPage struct {
	Count    int            `json:"count"`
	Counters []ShapeCounter `json:"counters"`
	Next     string         `json:"next,omitempty"`
	At       time.Time      `json:"at" doc:"when the kernel's counters were read"`
}

// ShaperIface is one shaped interface as GET /network and /status show it.
type ShaperIface struct {
	Name        string `json:"name"`
	Ifb         string `json:"ifb,omitempty" doc:"never set since upload is policed (earlier versions: the ifb link carrying its upload)"`
	Upload      string `json:"upload" doc:"how upload is held to the plan: police (one nftables limit object per subscriber, its IPv4 and IPv6 traffic in one bucket)"`
	Subscribers int    `json:"subscribers"`
	Leaf        string `json:"leaf" doc:"leaf queue discipline: fq_codel, or pfifo where the kernel lacks it"`
}

// ShaperState is the shaper's summary.
type ShaperState struct {
	Count  int           `json:"count"`
	Ifaces []ShaperIface `json:"ifaces"`
}

// Shaper events.
const (
	ShapeSet      = "shape.set"
	ShapeRemoved  = "shape.removed"
	ShapeReshaped = "shape.reshaped"
)

var (
	// ShaperSet shapes one subscriber (or changes its rates, address or
	// interface): its own classes and map elements only.
	ShaperSet = Define[Shape, ShapeAnswer](Meta{
		Service: "shaper", Name: "shapes.set",
		Summary: "Shape one subscriber to its rates (201 new, 200 changed). Only services call it.", Status: 201,
		Event: ShapeSet,
	})
	// ShaperRemove removes one subscriber's limit; 404 when not shaped.
	ShaperRemove = Define[ShapeRef, ShapeAnswer](Meta{
		Service: "shaper", Name: "shapes.remove",
		Summary: "Remove one subscriber's shaping; 404 when it has none. Only services call it.",
		Event:   ShapeRemoved,
	})
	// ShaperPlan gives every subscriber of a plan the plan's new rates.
	ShaperPlan = Define[PlanRates, PlanRatesAnswer](Meta{
		Service: "shaper", Name: "plans.rates",
		Summary: "Reshape every subscriber of a plan to new rates. Only services call it.",
		Event:   ShapeReshaped, Timeout: 2 * time.Minute,
	})
	// ShaperPage pages the shaped subscribers (reconciliation by the owner
	// of the subscribers).
	ShaperPage = Define[ShapePageRequest, ShapePage](Meta{
		Service: "shaper", Name: "shapes.page",
		Summary: "Shaped subscribers in id order, a page at a time. Only services call it.", Read: true,
	})
	// ShaperCounters pages the shaped subscribers' counters (the graph
	// service's samples and SNMP agent).
	ShaperCounters = Define[ShapePageRequest, ShapeCounterPage](Meta{
		Service: "shaper", Name: "counters.page",
		Summary: "Shaped subscribers' byte and packet counters in id order, a page at a time. Only services call it.", Read: true,
	})
	// ShaperStatus summarises the shaped interfaces.
	ShaperStatus = Define[None, ShaperState](Meta{
		Service: "shaper", Name: "status",
		Summary: "Shaped interfaces with their subscriber counts. Only services call it.", Read: true,
	})
)
