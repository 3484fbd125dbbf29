package api

import (
	"strconv"
	"strings"
	"time"
)

// The olt service (Document 3): POST /olt/{op} for every operation of the
// OLT driver, GET /olt, and the registry of OLTs (/olts).

// OLTTimeout bounds every OLT operation on the bus: the longest timeout a
// caller may ask for (300 s) and a margin for the answer to travel back.
const OLTTimeout = 310 * time.Second

// OLTConcurrency is how many calls of one OLT operation a replica works on
// at once: they wait on OLTs (tens of ms per command), not on the router,
// so many more than DefaultConcurrency.
const OLTConcurrency = 32

// Events of the olt service, on router.events.olt.<kind>.
const (
	EventOLTCreated = "olt.created"
	EventOLTUpdated = "olt.updated"
	EventOLTDeleted = "olt.deleted"
	// EventOLTOp is published after every successful write operation; the
	// data is {op, olt, result} (never credentials).
	EventOLTOp = "olt.write"
)

// OLTOptions are the OLT choice and the common options of Document 3, part
// of every operation's request. The name of a registered OLT or one-off
// credentials may also come in the X-OLT-Name, X-OLT-Host, X-OLT-User,
// X-OLT-Pass, X-OLT-Protocol, X-OLT-Port and X-OLT-Vendor headers; the body
// wins over a header. host, user and pass are refused in a URL (query
// string or action form).
type OLTOptions struct {
	OLT      string `json:"olt" pattern:"^[A-Za-z0-9_-]{1,40}$" hint:"a registered OLT's name" doc:"registered OLT name (or header X-OLT-Name); an unknown name is a 404"`
	Host     string `json:"host" api:"maxlen=253" pattern:"^[A-Za-z0-9.:_-]+$" hint:"an address or host name" doc:"one-off OLT address (or X-OLT-Host); never in a URL"`
	User     string `json:"user" api:"maxlen=64" pattern:"^[^\\x00-\\x1f\\x7f]*$" hint:"no control characters" doc:"one-off login user (or X-OLT-User); never in a URL"`
	Pass     string `json:"pass" api:"alias=password,notrim,maxlen=128" pattern:"^[^\\x00-\\x1f\\x7f]*$" hint:"no control characters" doc:"one-off password (or X-OLT-Pass; password is an alias); never in a URL, never logged"`
	Protocol string `json:"protocol" api:"enum=telnet|ssh" doc:"telnet (default) or ssh (or X-OLT-Protocol)"`
	Port     string `json:"port" pattern:"^([0-9]{1,5}|[0-9]{1,3}/[0-9]{1,3}/[0-9]{1,3})$" hint:"a TCP port number or a PON port frame/slot/port" doc:"a number is the OLT's TCP port (or X-OLT-Port); frame/slot/port is the operation's PON port"`
	PON      string `json:"pon" pattern:"^[0-9]{1,3}/[0-9]{1,3}/[0-9]{1,3}$" hint:"frame/slot/port" doc:"the operation's PON port (alias of a frame/slot/port in port)"`
	Vendor   string `json:"vendor" api:"enum=huawei" doc:"driver vendor for one-off credentials; default huawei, the bundled driver; a registered OLT uses its own"`
	Timeout  int    `json:"timeout" api:"min=10,max=300" doc:"seconds; default 40, 180 for config, plan-sync and init"`
	Raw      bool   `json:"raw" doc:"also return every command sent and the OLT's reply (always included on failure)"`
	DryRun   bool   `json:"dry_run" doc:"write operations that support it only plan the change"`
	Force    bool   `json:"force" doc:"override a shared-OLT guard where the operation allows it"`
}

// Options returns the common part of any OLT request (every request type
// embeds OLTOptions).
func (o *OLTOptions) Options() *OLTOptions { return o }

// Validate checks a numeric port's range.
func (o *OLTOptions) Validate() error {
	if n, ok := o.TCPPort(); ok && (n < 1 || n > 65535) {
		return &FieldError{Field: "port", Message: "port " + o.Port + " out of range 1-65535"}
	}
	return nil
}

// TCPPort is port when it is a number (the OLT's TCP port).
func (o *OLTOptions) TCPPort() (int, bool) {
	if o.Port == "" || strings.Contains(o.Port, "/") {
		return 0, false
	}
	n, err := strconv.Atoi(o.Port)
	return n, err == nil
}

// PONPort is the operation's PON port: pon, else a frame/slot/port in port.
func (o *OLTOptions) PONPort() string {
	if o.PON != "" {
		return o.PON
	}
	if strings.Contains(o.Port, "/") {
		return o.Port
	}
	return ""
}

func (o *OLTOptions) needPON() error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.PONPort() == "" {
		return &FieldError{Field: "port", Message: "port is required: a PON port frame/slot/port (pon is accepted too)"}
	}
	return nil
}

// OLTOpRequest is the request of the operations with no arguments of their
// own (info, autofind, vlans, serviceports, profiles, config, boards,
// save) and of those whose only argument is an optional PON port (onus,
// pon-ports, port-optical).
type OLTOpRequest struct {
	OLTOptions
}

// OLTRun is run's request.
type OLTRun struct {
	OLTOptions
	Command string `json:"command" api:"required,maxlen=200" pattern:"^display [^\\x00-\\x1f\\x7f]*$" hint:"one display command, no line breaks (use exec for configuration)"`
}

// OLTAudit is audit's request.
type OLTAudit struct {
	OLTOptions
	SVLAN int      `json:"svlan" api:"required,min=1,max=4094" doc:"the router's S-VLAN"`
	Ports []string `json:"ports" pattern:"^[0-9]{1,3}/[0-9]{1,3}/[0-9]{1,3}$" hint:"frame/slot/port" doc:"PON ports whose ONTs to list"`
}

// OLTCounters is counters' request.
type OLTCounters struct {
	OLTOptions
	ONTID   *int `json:"ont_id" api:"min=0,max=255" doc:"one ONT's counters; needs port"`
	Uplinks bool `json:"uplinks" doc:"include the uplink ports"`
	ONTs    bool `json:"onts" doc:"per-ONT counters of every ONT (of port if given)"`
}

// Validate: ont_id needs port.
func (r *OLTCounters) Validate() error {
	if r.ONTID != nil {
		return r.needPON()
	}
	return r.OLTOptions.Validate()
}

// OLTONTOptical is ont-optical's request.
type OLTONTOptical struct {
	OLTOptions
	ONTID string `json:"ont_id" pattern:"^(all|[0-9]{1,3})$" hint:"an ONT id or all" doc:"integer or all; default every ONT on the port"`
}

// Validate: port is required.
func (r *OLTONTOptical) Validate() error { return r.needPON() }

// OLTExec is exec's request (not shown by the spec).
type OLTExec struct {
	OLTOptions
	Commands []string `json:"commands" api:"required" pattern:"^[^\\x00-\\x1f\\x7f]{1,300}$" hint:"one command line each, no line breaks" doc:"lines sent in config mode in order, stopping at the first error; needs force on a shared OLT"`
}

// OLTVLANAdd is vlan-add's request.
type OLTVLANAdd struct {
	OLTOptions
	VLAN        int      `json:"vlan" api:"required,min=1,max=4094"`
	Type        string   `json:"type" api:"enum=smart|standard|mux|super" doc:"default smart"`
	Attribute   string   `json:"attribute" api:"enum=common|stacking|qinq"`
	Description string   `json:"description" api:"maxlen=32" pattern:"^[^\\x00-\\x1f\\x7f\"?]*$" hint:"no control characters, quotes or ?"`
	Uplinks     []string `json:"uplinks" pattern:"^[0-9]{1,3}/[0-9]{1,3}/[0-9]{1,3}$" hint:"frame/slot/port" doc:"ports to tag the VLAN on"`
}

// OLTVLANDel is vlan-del's request.
type OLTVLANDel struct {
	OLTOptions
	VLAN    int      `json:"vlan" api:"required,min=1,max=4094"`
	Uplinks []string `json:"uplinks" pattern:"^[0-9]{1,3}/[0-9]{1,3}/[0-9]{1,3}$" hint:"frame/slot/port" doc:"ports to untag it from first"`
}

// OLTPortVLAN is port-vlan's request.
type OLTPortVLAN struct {
	OLTOptions
	VLAN   int  `json:"vlan" api:"required,min=1,max=4094"`
	Remove bool `json:"remove" doc:"untag instead of tag"`
}

// Validate: port is required.
func (r *OLTPortVLAN) Validate() error { return r.needPON() }

// OLTProfile is profile-add's and profile-del's request (not shown by the
// spec).
type OLTProfile struct {
	OLTOptions
	Kind         string `json:"kind" api:"required,enum=dba|line|service|traffic"`
	ID           *int   `json:"id" api:"min=0,max=65535" doc:"required except for traffic, where the OLT picks it"`
	Name         string `json:"name" pattern:"^[A-Za-z0-9_.-]{1,32}$" hint:"1-32 letters, digits, _ . -"`
	Kbps         int    `json:"kbps" api:"min=64,max=10000000" doc:"dba: type-4 maximum; traffic: CIR = PIR"`
	DBAProfileID int    `json:"dba_profile_id" api:"min=0,max=65535"`
	Gemport      int    `json:"gemport" api:"min=0,max=1023"`
	VLAN         int    `json:"vlan" api:"min=1,max=4094"`
	ETHPorts     int    `json:"eth_ports" api:"min=1,max=24"`
}

// OLTONTAdd is ont-add's request.
type OLTONTAdd struct {
	OLTOptions
	SN          string `json:"sn" api:"required" pattern:"^[0-9A-Fa-f]{16}$" hint:"16 hex digits"`
	VLAN        int    `json:"vlan" api:"required,min=1,max=4094" doc:"the PON port's VLAN"`
	UserVLAN    int    `json:"user_vlan" api:"min=1,max=4094" doc:"VLAN the ONT sends; default vlan"`
	Description string `json:"description" api:"maxlen=64" pattern:"^[^\\x00-\\x1f\\x7f\"?]*$" hint:"no control characters, quotes or ?"`
	Plan        string `json:"plan" pattern:"^[A-Za-z0-9_-]{1,40}$" hint:"a plan's name" doc:"a plan on this router (rates x the OLT headroom, 1.10); 404 when none"`
	DownKbps    int    `json:"down_kbps" api:"min=64,max=10000000" doc:"explicit rate instead of plan"`
	UpKbps      int    `json:"up_kbps" api:"min=64,max=10000000" doc:"explicit rate instead of plan"`
	LineProfile int    `json:"line_profile" api:"min=0,max=65535"`
	SrvProfile  int    `json:"srv_profile" api:"min=0,max=65535"`
	ProfileID   int    `json:"profile_id" api:"min=0,max=65535" doc:"sets both profiles; default the vlan"`
	SVLAN       int    `json:"svlan" api:"min=1,max=4094" doc:"outer VLAN; a registered OLT's svlan when omitted"`
	IPTV        bool   `json:"iptv" doc:"also a service-port on the IPTV VLAN"`
	IPTVVLAN    int    `json:"iptv_vlan" api:"min=1,max=4094"`
	ETHPorts    int    `json:"eth_ports" api:"min=1,max=24" doc:"default 1"`
	Gemport     int    `json:"gemport" api:"min=0,max=1023" doc:"default 1"`
}

// Validate: port is required.
func (r *OLTONTAdd) Validate() error { return r.needPON() }

// OLTONTRef names one ONT (ont-del, ont-reboot, ont-activate,
// ont-deactivate).
type OLTONTRef struct {
	OLTOptions
	ONTID       int `json:"ont_id" api:"required,min=0,max=255"`
	ExpectSVLAN int `json:"expect_svlan" api:"min=1,max=4094" doc:"one more S-VLAN counted as this router's for this ONT"`
}

// Validate: port is required.
func (r *OLTONTRef) Validate() error { return r.needPON() }

// OLTONTDesc is ont-desc's request.
type OLTONTDesc struct {
	OLTOptions
	ONTID       int    `json:"ont_id" api:"required,min=0,max=255"`
	Description string `json:"description" api:"maxlen=64" pattern:"^[^\\x00-\\x1f\\x7f\"?]*$" hint:"no control characters, quotes or ?" doc:"new text; empty clears it"`
}

// Validate: port is required.
func (r *OLTONTDesc) Validate() error { return r.needPON() }

// OLTONTReplan is ont-replan's request.
type OLTONTReplan struct {
	OLTOptions
	ONTID       int    `json:"ont_id" api:"required,min=0,max=255"`
	Plan        string `json:"plan" api:"required" pattern:"^[A-Za-z0-9_-]{1,40}$"`
	DownKbps    int    `json:"down_kbps" api:"required,min=64,max=10000000"`
	UpKbps      int    `json:"up_kbps" api:"required,min=64,max=10000000"`
	VLAN        int    `json:"vlan" api:"required,min=1,max=4094" doc:"inner VLAN"`
	UserVLAN    int    `json:"user_vlan" api:"min=1,max=4094"`
	SVLAN       int    `json:"svlan" api:"min=1,max=4094"`
	ExpectSVLAN int    `json:"expect_svlan" api:"min=1,max=4094"`
}

// Validate: port is required.
func (r *OLTONTReplan) Validate() error { return r.needPON() }

// OLTNTP is ntp's request (not shown by the spec).
type OLTNTP struct {
	OLTOptions
	Servers []string `json:"servers" api:"required,format=ip"`
	Remove  bool     `json:"remove"`
}

// OLTSysname is sysname's request (not shown by the spec).
type OLTSysname struct {
	OLTOptions
	Name string `json:"name" api:"required" pattern:"^[A-Za-z0-9_.-]{1,32}$" hint:"one word of 1-32 letters, digits, _ . -"`
}

// OLTPlanRate is one plan given to plan-sync.
type OLTPlanRate struct {
	Name     string `json:"name"`
	DownKbps int    `json:"down_kbps"`
	UpKbps   int    `json:"up_kbps"`
}

// OLTPlanSync is plan-sync's request (not shown by the spec).
type OLTPlanSync struct {
	OLTOptions
	Plans []OLTPlanRate `json:"plans" api:"required" doc:"list of {name, down_kbps, up_kbps}"`
}

// OLTInit is init's request (not shown by the spec).
type OLTInit struct {
	OLTOptions
	SVLAN   int      `json:"svlan" api:"min=1,max=4094" doc:"default the registered OLT's"`
	Uplinks []string `json:"uplinks" pattern:"^[0-9]{1,3}/[0-9]{1,3}/[0-9]{1,3}$" hint:"frame/slot/port"`
}

// OLTTarget names the OLT an operation ran on.
type OLTTarget struct {
	Host string `json:"host"`
	Name string `json:"name" doc:"registered name; empty for one-off credentials"`
}

// OLTAnswer is the envelope of every OLT operation. HTTP status is code.
type OLTAnswer struct {
	OK     bool      `json:"ok"`
	Code   int       `json:"code" doc:"200 success; 401 the OLT refused the login; 502 any other OLT failure"`
	Op     string    `json:"op"`
	OLT    OLTTarget `json:"olt"`
	TookMS int64     `json:"took_ms"`
	Result any       `json:"result" doc:"the operation's result (Document 3, Result shapes); null on failure"`
	Error  *string   `json:"error"`
	Note   string    `json:"note,omitempty" doc:"after a successful write other than save and dry runs: not saved to flash yet"`
	Raw    any       `json:"raw,omitempty" doc:"{exchanges: [{sent, reply}]}: when raw was asked, and always on failure"`
}

// OLTUsage answers GET /olt.
type OLTUsage struct {
	Ops      []string `json:"ops"`
	WriteOps []string `json:"write_ops"`
	Usage    string   `json:"usage"`
}

// OLTOpName is the {op} of POST /olt/{op} for an operation that is not
// one of ops.
type OLTOpName struct {
	Op string `json:"op"`
}

// oltOps lists the operations of Document 3 with their request types; the
// olt service binds each.
func oltOp[Req any](name, summary string, write bool) Op[Req, OLTAnswer] {
	kind := "Reads"
	if write {
		kind = "Changes"
	}
	return Define[Req, OLTAnswer](Meta{
		Service: "olt", Name: "op." + name,
		Summary: kind + " the OLT: " + summary + " Answers the OLT envelope; any other method than POST is a 405.",
		REST:    []REST{{"POST", "/olt/" + name}}, Action: "olt-" + name,
		Timeout: OLTTimeout, Attempt: OLTTimeout, Concurrency: OLTConcurrency,
	})
}

// The OLT operations, one per entry of `ops`.
var (
	OLTInfo          = oltOp[OLTOpRequest]("info", "product, version, uptime, sysname, boards, time, NTP state.", false)
	OLTAutofind      = oltOp[OLTOpRequest]("autofind", "ONTs seen but not registered.", false)
	OLTONUs          = oltOp[OLTOpRequest]("onus", "registered ONTs (port: one PON port; default every PON board).", false)
	OLTVLANs         = oltOp[OLTOpRequest]("vlans", "the VLAN table and the VLANs of every uplink port.", false)
	OLTServicePorts  = oltOp[OLTOpRequest]("serviceports", "subscriber flows.", false)
	OLTProfiles      = oltOp[OLTOpRequest]("profiles", "DBA, line and service profiles and traffic tables.", false)
	OLTConfig        = oltOp[OLTOpRequest]("config", "the running configuration as text (default timeout 180 s).", false)
	OLTRunOp         = oltOp[OLTRun]("run", "one display command.", false)
	OLTAuditOp       = oltOp[OLTAudit]("audit", "what the OLT holds for this router on its S-VLAN.", false)
	OLTBoards        = oltOp[OLTOpRequest]("boards", "slot, type, state.", false)
	OLTPONPorts      = oltOp[OLTOpRequest]("pon-ports", "PON ports and their state (port: one).", false)
	OLTPortOptical   = oltOp[OLTOpRequest]("port-optical", "optical readings of the PON ports' transceivers (port: one).", false)
	OLTCountersOp    = oltOp[OLTCounters]("counters", "traffic counters.", false)
	OLTONTOpticalOp  = oltOp[OLTONTOptical]("ont-optical", "ONT optical readings on a PON port.", false)
	OLTExecOp        = oltOp[OLTExec]("exec", "configuration lines sent as given (force on a shared OLT).", true)
	OLTVLANAddOp     = oltOp[OLTVLANAdd]("vlan-add", "create a VLAN and tag it on uplinks.", true)
	OLTVLANDelOp     = oltOp[OLTVLANDel]("vlan-del", "untag and delete a VLAN.", true)
	OLTPortVLANOp    = oltOp[OLTPortVLAN]("port-vlan", "tag (or untag) a VLAN on a port.", true)
	OLTProfileAdd    = oltOp[OLTProfile]("profile-add", "create a DBA, line or service profile or a traffic table.", true)
	OLTProfileDel    = oltOp[OLTProfile]("profile-del", "delete a profile or traffic table.", true)
	OLTONTAddOp      = oltOp[OLTONTAdd]("ont-add", "register an ONT with its service-port (plan: a router plan; 404 when none).", true)
	OLTONTDel        = oltOp[OLTONTRef]("ont-del", "delete an ONT and its service-ports.", true)
	OLTONTReboot     = oltOp[OLTONTRef]("ont-reboot", "reboot an ONT.", true)
	OLTONTDescOp     = oltOp[OLTONTDesc]("ont-desc", "set an ONT's description.", true)
	OLTNTPOp         = oltOp[OLTNTP]("ntp", "add or remove NTP servers.", true)
	OLTSysnameOp     = oltOp[OLTSysname]("sysname", "set the system name.", true)
	OLTSave          = oltOp[OLTOpRequest]("save", "save the configuration to flash.", true)
	OLTPlanSyncOp    = oltOp[OLTPlanSync]("plan-sync", "traffic tables for the given plans (default timeout 180 s).", true)
	OLTInitOp        = oltOp[OLTInit]("init", "prepare the OLT: S-VLAN, uplinks, autofind (default timeout 180 s).", true)
	OLTONTActivate   = oltOp[OLTONTRef]("ont-activate", "activate an ONT (service resume).", true)
	OLTONTDeactivate = oltOp[OLTONTRef]("ont-deactivate", "deactivate an ONT (service suspend).", true)
	OLTONTReplanOp   = oltOp[OLTONTReplan]("ont-replan", "new rates and VLANs on an ONT's service-ports.", true)

	// OLTUsageGet is GET /olt.
	OLTUsageGet = Define[None, OLTUsage](Meta{
		Service: "olt", Name: "usage",
		Summary: "The operations (`ops`, `write_ops`) and how to call them; contacts no OLT.",
		REST:    []REST{{"GET", "/olt"}}, Read: true,
	})
	// OLTUnknownOp answers POST /olt/{op} for an op that does not exist.
	OLTUnknownOp = Define[OLTOpName, None](Meta{
		Service: "olt", Name: "op.unknown",
		Summary: "An operation that does not exist: 404 with the list `ops`.",
		REST:    []REST{{"POST", "/olt/{op}"}},
	})
)

// OLTOps lists every operation of POST /olt/{op}; the olt service binds
// each to its driver method.
var OLTOps = []Operation{
	OLTInfo, OLTAutofind, OLTONUs, OLTVLANs, OLTServicePorts, OLTProfiles, OLTConfig, OLTRunOp,
	OLTAuditOp, OLTBoards, OLTPONPorts, OLTPortOptical, OLTCountersOp, OLTExecOp, OLTVLANAddOp,
	OLTVLANDelOp, OLTPortVLANOp, OLTProfileAdd, OLTProfileDel, OLTONTAddOp, OLTONTDel, OLTONTReboot,
	OLTONTDescOp, OLTONTOpticalOp, OLTNTPOp, OLTSysnameOp, OLTSave, OLTPlanSyncOp, OLTInitOp,
	OLTONTActivate, OLTONTDeactivate, OLTONTReplanOp,
}

// ---- the registry (/olts) ----

// OLTFields are a registered OLT's settable fields. Credentials are sealed
// on the router (authenticated encryption under a key in the state
// directory) and never returned.
type OLTFields struct {
	Host     string  `json:"host" api:"maxlen=253" pattern:"^[A-Za-z0-9.:_-]+$" hint:"an address or host name"`
	Port     int     `json:"port" api:"min=1,max=65535" doc:"TCP port; default 23 (telnet) or 22 (ssh)"`
	Protocol string  `json:"protocol" api:"enum=telnet|ssh" doc:"default telnet"`
	User     string  `json:"user" api:"maxlen=64" pattern:"^[^\\x00-\\x1f\\x7f]*$" hint:"no control characters" doc:"login user; sealed, never returned"`
	Pass     string  `json:"pass" api:"alias=password,notrim,maxlen=128" pattern:"^[^\\x00-\\x1f\\x7f]*$" hint:"no control characters" doc:"login password; sealed, never returned (password_set says whether one is stored)"`
	Vendor   string  `json:"vendor" api:"enum=huawei" doc:"driver vendor; default huawei"`
	SVLAN    *int    `json:"svlan" api:"min=0,max=4094" doc:"this router's S-VLAN on a shared OLT; 0 clears"`
	Operator *bool   `json:"operator" doc:"another company's OLT: every shared-OLT guard applies"`
	IPTVVLAN *int    `json:"iptv_vlan" api:"min=0,max=4094" doc:"the OLT's IPTV VLAN; 0 clears"`
	Prefix   string  `json:"prefix" pattern:"^[A-Za-z][A-Za-z0-9_]{0,15}$" hint:"1-16 letters, digits or _, starting with a letter" doc:"name prefix of objects the router creates; default router, or s<svlan>"`
	Comment  *string `json:"comment" api:"maxlen=200"`
	// RxMinDBm and RxMaxDBm are this OLT's optical thresholds: an ONT
	// received outside them is reported by the poller (ont.optical).
	RxMinDBm *float64 `json:"rx_min_dbm" api:"min=-50,max=10" doc:"received optical power (dBm) under which the poller reports an ONT; 0 clears (the router's olt_rx_min_dbm, default -27)"`
	RxMaxDBm *float64 `json:"rx_max_dbm" api:"min=-50,max=10" doc:"received optical power (dBm) over which the poller reports an ONT; 0 clears (the router's olt_rx_max_dbm, default -8)"`
	// AcceptHostKey forgets the recorded SSH host key, so the key the OLT
	// presents next is recorded (after a replaced OLT or a new key).
	AcceptHostKey bool `json:"accept_host_key" doc:"forget the recorded SSH host key; the next connection records the one presented"`
}

// OLTAdd is POST /olts.
type OLTAdd struct {
	Name string `json:"name" api:"required" pattern:"^[A-Za-z0-9_-]{1,40}$" hint:"use 1-40 letters, digits, _ or -"`
	OLTFields
}

// Validate: a new OLT needs host, user and pass.
func (r *OLTAdd) Validate() error {
	for _, f := range []struct{ name, v string }{{"host", r.Host}, {"user", r.User}, {"pass", r.Pass}} {
		if f.v == "" {
			return &FieldError{Field: f.name, Message: f.name + " is required"}
		}
	}
	return nil
}

// OLTSet is POST /olts/{name}: the fields sent change, the others stay.
type OLTSet struct {
	Name string `json:"name" api:"required" doc:"the path's"`
	OLTFields
}

// OLTNameRef names a registered OLT (DELETE /olts/{name}).
type OLTNameRef struct {
	Name string `json:"name" api:"required" doc:"the path's or the body's"`
}

// OLTRecord is a registered OLT as answered: never its credentials.
type OLTRecord struct {
	Name     string `json:"name"`
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol"`
	Vendor   string `json:"vendor"`
	SVLAN    int    `json:"svlan"`
	Operator bool   `json:"operator"`
	IPTVVLAN int    `json:"iptv_vlan"`
	Prefix   string `json:"prefix"`
	Comment  string `json:"comment"`
	// RxMinDBm and RxMaxDBm: 0 is the router's setting.
	RxMinDBm    float64 `json:"rx_min_dbm,omitempty" doc:"optical threshold of the poller's ont.optical; absent: the router's"`
	RxMaxDBm    float64 `json:"rx_max_dbm,omitempty" doc:"optical threshold of the poller's ont.optical; absent: the router's"`
	UserSet     bool    `json:"user_set"`
	PasswordSet bool    `json:"password_set"`
	// SSHHostKey is recorded on the first SSH contact and checked on
	// every later one (a changed key is refused until accepted).
	SSHHostKey            string   `json:"ssh_host_key" doc:"recorded on first SSH contact, checked afterwards"`
	SSHHostKeyFingerprint string   `json:"ssh_host_key_fingerprint"`
	SSHLegacy             []string `json:"ssh_legacy_algorithms" doc:"older SSH algorithms the OLT needed (CBC ciphers, SHA-1 key exchanges), empty when none"`
	Created               string   `json:"created"`
	Updated               string   `json:"updated"`
}

// OLTList answers GET /olts.
type OLTList struct {
	Count int         `json:"count"`
	OLTs  []OLTRecord `json:"olts"`
}

// OLTPutAnswer answers POST /olts and POST /olts/{name}.
type OLTPutAnswer struct {
	Result
	OLT OLTRecord `json:"olt"`
}

// EventOf publishes olt.created or olt.updated with the record (no
// credentials).
func (a *OLTPutAnswer) EventOf() (string, any) {
	if a.Code == 201 {
		return EventOLTCreated, a.OLT
	}
	return EventOLTUpdated, a.OLT
}

// OLTDeleteAnswer answers DELETE /olts/{name}.
type OLTDeleteAnswer struct {
	Result
	Name string `json:"name"`
}

var (
	// OLTsList is GET /olts.
	OLTsList = Define[None, OLTList](Meta{
		Service: "olt", Name: "olts.list",
		Summary: "Registered OLTs, sorted by name; credentials never (user_set, password_set say whether they are stored).",
		REST:    []REST{{"GET", "/olts"}}, Action: "olts-list", Read: true,
	})
	// OLTsAdd is POST /olts.
	OLTsAdd = Define[OLTAdd, OLTPutAnswer](Meta{
		Service: "olt", Name: "olts.add",
		Summary: "Register an OLT (201); 409 when the name is taken. host, user and pass are required; credentials are sealed on the router.",
		REST:    []REST{{"POST", "/olts"}}, Action: "olts-add", Status: 201, Event: EventOLTCreated,
	})
	// OLTsSet is POST /olts/{name}.
	OLTsSet = Define[OLTSet, OLTPutAnswer](Meta{
		Service: "olt", Name: "olts.set",
		Summary: "Change a registered OLT: the fields sent change, the others stay (pass alone re-seals the password); 404 when none.",
		REST:    []REST{{"POST", "/olts/{name}"}}, Action: "olts-set", Event: EventOLTUpdated,
	})
	// OLTsDelete is DELETE /olts/{name}.
	OLTsDelete = Define[OLTNameRef, OLTDeleteAnswer](Meta{
		Service: "olt", Name: "olts.delete",
		Summary: "Forget a registered OLT and its sealed credentials; 404 when none.",
		REST:    []REST{{"DELETE", "/olts/{name}"}}, Action: "olts-del", Event: EventOLTDeleted,
	})
)

// ---- configuration backups and plan synchronisation ----

// OLTPick names a registered OLT; empty means every registered OLT (sync,
// backup) or the only one (backups, diff).
type OLTPick struct {
	OLT string `json:"olt" pattern:"^[A-Za-z0-9_-]{1,40}$" hint:"a registered OLT's name" doc:"registered OLT name; default every registered OLT (backup, sync) or the only one (backups, diff)"`
}

// OLTBackupRequest is POST /olt/backup.
type OLTBackupRequest struct {
	OLTPick
	Timeout int `json:"timeout" api:"min=10,max=300" doc:"seconds per OLT; default 180"`
}

// OLTBackupDone is one OLT's backup.
type OLTBackupDone struct {
	OLT     string `json:"olt"`
	OK      bool   `json:"ok"`
	Rev     int    `json:"rev" doc:"the revision now newest"`
	Changed bool   `json:"changed" doc:"false when the configuration equals the newest revision (no new revision)"`
	Lines   int    `json:"lines"`
	Bytes   int    `json:"bytes"`
	Error   string `json:"error,omitempty"`
}

// OLTBackupAnswer answers POST /olt/backup.
type OLTBackupAnswer struct {
	Result
	Count   int             `json:"count"`
	Backups []OLTBackupDone `json:"backups"`
}

// OLTBackupsRequest is GET /olt/backups.
type OLTBackupsRequest struct {
	OLTPick
	N int `json:"n" api:"min=1,max=1000,default=20" doc:"newest n revisions; default 20"`
}

// OLTBackupInfo is one stored revision (without its text).
type OLTBackupInfo struct {
	Rev     int    `json:"rev"`
	Time    string `json:"time"`
	Lines   int    `json:"lines"`
	Bytes   int    `json:"bytes"`
	SHA256  string `json:"sha256"`
	Trigger string `json:"trigger" doc:"api or periodic"`
}

// OLTBackupList answers GET /olt/backups.
type OLTBackupList struct {
	OLT     string          `json:"olt"`
	Count   int             `json:"count"`
	Backups []OLTBackupInfo `json:"backups" doc:"newest first"`
}

// OLTDiffRequest is GET /olt/diff.
type OLTDiffRequest struct {
	OLTPick
	Rev int    `json:"rev" api:"min=1" doc:"from this revision; default the newest"`
	To  string `json:"to" pattern:"^([0-9]{1,9}|now)$" hint:"a revision number or now" doc:"to this revision, or now (the OLT's running configuration, read now; the default)"`
}

// OLTDiff answers GET /olt/diff.
type OLTDiff struct {
	OLT     string `json:"olt"`
	From    string `json:"from"`
	To      string `json:"to"`
	Changed bool   `json:"changed"`
	Added   int    `json:"added" doc:"lines"`
	Removed int    `json:"removed" doc:"lines"`
	Diff    string `json:"diff" doc:"unified diff, three lines of context"`
}

// OLTSyncRequest is POST /olt/sync.
type OLTSyncRequest struct {
	OLTPick
	DryRun bool `json:"dry_run" doc:"only plan: list what would be created"`
}

// OLTSyncDone is one OLT's synchronisation.
type OLTSyncDone struct {
	OLT    string `json:"olt"`
	OK     bool   `json:"ok"`
	Result any    `json:"result" doc:"plan-sync's result: per plan down_index, up_index, created; commands"`
	Error  string `json:"error,omitempty"`
}

// OLTSyncAnswer answers POST /olt/sync.
type OLTSyncAnswer struct {
	Result
	DryRun bool          `json:"dry_run"`
	Plans  int           `json:"plans" doc:"router plans pushed"`
	Count  int           `json:"count"`
	OLTs   []OLTSyncDone `json:"olts"`
}

var (
	// OLTBackupOp is POST /olt/backup.
	OLTBackupOp = Define[OLTBackupRequest, OLTBackupAnswer](Meta{
		Service: "olt", Name: "backup.create",
		Summary: "Capture the running configuration of an OLT (or of every registered OLT, one at a time) as a new numbered revision, compressed in etcd; an unchanged configuration adds none. Code 502 when an OLT failed (each OLT's outcome in backups).",
		REST:    []REST{{"POST", "/olt/backup"}}, Action: "olt-backup",
		Timeout: OLTTimeout, Attempt: OLTTimeout,
	})
	// OLTBackupsList is GET /olt/backups.
	OLTBackupsList = Define[OLTBackupsRequest, OLTBackupList](Meta{
		Service: "olt", Name: "backup.list",
		Summary: "An OLT's stored configuration revisions, newest first (n, default 20).",
		REST:    []REST{{"GET", "/olt/backups"}}, Action: "olt-backups", Read: true,
	})
	// OLTDiffOp is GET /olt/diff.
	OLTDiffOp = Define[OLTDiffRequest, OLTDiff](Meta{
		Service: "olt", Name: "backup.diff",
		Summary: "Unified diff between two revisions of an OLT's configuration, or a revision and the configuration now (rev default the newest, to default now); 404 for a revision not stored.",
		REST:    []REST{{"GET", "/olt/diff"}}, Action: "olt-diff", Read: true,
		Timeout: OLTTimeout, Attempt: OLTTimeout,
	})
	// OLTSyncOp is POST /olt/sync.
	OLTSyncOp = Define[OLTSyncRequest, OLTSyncAnswer](Meta{
		Service: "olt", Name: "sync",
		Summary: "Push the router's plans to an OLT (or every registered OLT, one at a time) as traffic tables at rate x 1.10, named with the router's prefix (plan-sync). Code 502 when an OLT failed.",
		REST:    []REST{{"POST", "/olt/sync"}}, Action: "olt-sync",
		Timeout: OLTTimeout, Attempt: OLTTimeout,
	})
)

// OLTSyncStarted answers sync.start.
type OLTSyncStarted struct {
	OLTs int `json:"olts" doc:"registered OLTs being brought in step"`
}

// OLTSyncStart starts plan synchronisation of every registered OLT in the
// background; the subscribers service calls it after each plan change.
var OLTSyncStart = Define[None, OLTSyncStarted](Meta{
	Service: "olt", Name: "sync.start",
	Summary: "Start bringing every registered OLT in step with the router's plans in the background (as POST /olt/sync); answers how many. Called by the subscribers service after each plan change.",
})
