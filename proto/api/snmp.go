package api

// The SNMP agent (Document 1, Protection: GET and POST /snmp; "The SNMP
// agent is read-only, version 2c, UDP 161, IPv4 and IPv6"), served by the
// graph service.

// SNMPState answers GET /snmp. The community itself is never in it.
type SNMPState struct {
	Running        bool         `json:"running" doc:"true only while the agent's UDP sockets are bound and answering"`
	Enabled        string       `json:"enabled" doc:"yes once a community is set (there is no default community such as public), else no" example:"yes"`
	Listen         string       `json:"listen" doc:"the sockets it listens on in the router's namespace, IPv4 (udp) and IPv6 (udp6); while not running, those it would" example:"udp:161, udp6:161"`
	CommunitySet   bool         `json:"community_set" doc:"a community is set (it is stored sealed and never returned)"`
	SysLocation    string       `json:"sys_location" doc:"SNMPv2-MIB sysLocation.0"`
	SysContact     string       `json:"sys_contact" doc:"SNMPv2-MIB sysContact.0"`
	PerClientCount int          `json:"per_client_count" doc:"rows in the per-client table (one per registered client), as of refreshed_at"`
	Sample         []SNMPSample `json:"sample" doc:"a few of the agent's variables with their current values, to check a poller against"`
	Version        string       `json:"version" doc:"SNMP versions answered: 2c (GetRequest, GetNextRequest, GetBulkRequest), and v1 Get and GetNext" example:"2c"`
	Access         string       `json:"access" doc:"read-only: a SetRequest is answered notWritable (v1: noSuchName)" example:"read-only"`
	MIBs           string       `json:"mibs" doc:"the groups served"`
	ClientTable    string       `json:"client_table" doc:"the per-client table's OID and columns (enterprises.32473 is RFC 5612's documentation number: the product has no enterprise number of its own yet)"`
	Counters       string       `json:"counters" doc:"where the per-client byte counters come from, or why their columns are left out (the shaper did not answer): never made-up numbers"`
	RefreshedAt    string       `json:"refreshed_at" doc:"when the per-client table was last read from the subscribers and the shaper (every 30 s while enabled); empty before the first read" example:"2026-11-24 10:00:00"`
	Problem        string       `json:"problem" doc:"why an enabled agent is not running (the port is taken, the sealed community does not open with this router's key), else empty"`
	Requests       uint64       `json:"requests" doc:"datagrams received since the service started"`
	BadCommunity   uint64       `json:"bad_community" doc:"requests with a wrong community (not answered) since the service started"`
}

// SNMPSample is one variable of GET /snmp's sample.
type SNMPSample struct {
	OID   string `json:"oid" example:".1.3.6.1.2.1.1.6.0"`
	Name  string `json:"name" example:"sysLocation.0"`
	Value string `json:"value" doc:"as text; noSuchInstance when the agent has no value for it now"`
}

// SNMPSet is POST /snmp; a field left out keeps its value.
type SNMPSet struct {
	Community *string `json:"community" api:"notrim" doc:"1-64 characters from A-Z a-z 0-9 _ . : -; stored sealed, never returned; setting one enables the agent"`
	Location  *string `json:"location" api:"maxlen=255" doc:"sysLocation (at most 255 characters: SNMP's DisplayString)"`
	Contact   *string `json:"contact" api:"maxlen=255" doc:"sysContact (at most 255 characters)"`
}

// Validate checks the community without ever echoing it.
func (r *SNMPSet) Validate() error {
	if r.Community == nil {
		return nil
	}
	if !ValidCommunity(*r.Community) {
		return invalid("community", "invalid community: 1-64 characters from A-Z a-z 0-9 _ . : -")
	}
	return nil
}

// ValidCommunity is the spec's rule for an SNMP community.
func ValidCommunity(c string) bool {
	if len(c) < 1 || len(c) > 64 {
		return false
	}
	for i := 0; i < len(c); i++ {
		switch b := c[i]; {
		case b >= 'A' && b <= 'Z', b >= 'a' && b <= 'z', b >= '0' && b <= '9', b == '_', b == '.', b == ':', b == '-':
		default:
			return false
		}
	}
	return true
}

// SNMPSetAnswer answers POST /snmp.
type SNMPSetAnswer struct {
	Result
	Detail string `json:"detail" doc:"the agent's sockets once running, e.g. udp:161, udp6:161"`
}

var (
	// SNMPStatus is GET /snmp.
	SNMPStatus = Define[None, SNMPState](Meta{
		Service: "graph", Name: "snmp.status", Read: true,
		Summary: "SNMP agent state: read-only SNMPv2c on UDP 161, IPv4 and IPv6, in the router's namespace. The agent is enabled once a community is set (no default community). It serves SNMPv2-MIB system and snmp groups, IF-MIB ifNumber, ifTable (32-bit counters wrap) and ifXTable (64-bit counters), and a per-client table at 1.3.6.1.4.1.32473.2.2 (index: the client's MAC as six sub-identifiers; columns 1 MAC, 2 IPv4 address, 3 hostname, 4 plan, 5 bytes to the client and 6 bytes from the client as Counter64, left out when the shaper does not give them) with its row count at 1.3.6.1.4.1.32473.2.1.0, refreshed every 30 s. The community is never returned.",
		REST:    []REST{{"GET", "/snmp"}}, Action: "snmp-status",
	})
	// SNMPSetOp is POST /snmp.
	SNMPSetOp = Define[SNMPSet, SNMPSetAnswer](Meta{
		Service: "graph", Name: "snmp.set",
		Summary: "Set the SNMP community, sysLocation and sysContact (omitted fields keep their value); the community is stored sealed and the agent is started (or takes the new values at once). 400 naming community when it is not 1-64 of A-Z a-z 0-9 _ . : -; 500 with detail when the settings are not saved or the agent cannot start (e.g. UDP 161 is taken), the previous settings then back.",
		REST:    []REST{{"POST", "/snmp"}}, Action: "snmp-set",
	})
	// SNMPConfig is the graph service's configuration document
	// etc/snmp.json (the community in it sealed).
	SNMPConfig = configOwner("graph", "etc/snmp.json")

	SNMPOps = []Operation{SNMPStatus, SNMPSetOp, SNMPConfig.Export, SNMPConfig.Import}
)
