package driver

import "time"

// Options are the common options of Document 3 that reach the driver (the
// OLT choice and `raw` are handled by the caller).
type Options struct {
	// Timeout of the whole call; zero means the operation's default. The
	// API's `timeout` is in seconds; its adapter converts it.
	Timeout time.Duration `json:"-"`
	// DryRun makes a write operation only plan: the result lists the
	// changing commands and none of them is sent.
	DryRun bool `json:"dry_run,omitempty"`
	// Force overrides a shared-OLT guard where the operation allows it.
	Force bool `json:"force,omitempty"`
}

// ---- reading operations ----

// Board is one slot of `display board`.
type Board struct {
	Slot     int    `json:"slot"`
	Board    string `json:"board"`
	Status   string `json:"status"`
	SubType0 string `json:"subtype0,omitempty"`
	SubType1 string `json:"subtype1,omitempty"`
	Online   string `json:"online,omitempty"`
}

// InfoResult is the result of info.
type InfoResult struct {
	Product string  `json:"product"`
	Version string  `json:"version"`
	Patch   string  `json:"patch,omitempty"`
	Uptime  string  `json:"uptime"`
	Sysname string  `json:"sysname"`
	Boards  []Board `json:"boards"`
	Time    string  `json:"time"`
	NTP     string  `json:"ntp"`
}

// AutofindONT is an ONT the OLT sees on a PON port but has not registered.
type AutofindONT struct {
	Port            string `json:"port"`
	SN              string `json:"sn"`
	Vendor          string `json:"vendor"`
	Version         string `json:"version,omitempty"`
	SoftwareVersion string `json:"software_version,omitempty"`
	EquipmentID     string `json:"equipment_id,omitempty"`
	MAC             string `json:"mac,omitempty"`
	Seen            string `json:"seen"`
}

// AutofindResult is the result of autofind.
type AutofindResult struct {
	Count int           `json:"count"`
	ONTs  []AutofindONT `json:"onts"`
}

// ONT is a registered ONT with the states the OLT reports.
type ONT struct {
	Port        string `json:"port"`
	ID          int    `json:"id"`
	SN          string `json:"sn"`
	Control     string `json:"control,omitempty"`
	RunState    string `json:"run_state"`
	ConfigState string `json:"config_state"`
	MatchState  string `json:"match_state"`
	Description string `json:"description,omitempty"`
}

// ONUsResult is the result of onus.
type ONUsResult struct {
	Count int   `json:"count"`
	ONTs  []ONT `json:"onts"`
}

// VLAN is one row of the OLT's VLAN table.
type VLAN struct {
	ID           int    `json:"id"`
	Type         string `json:"type"`
	Attribute    string `json:"attribute"`
	StandardPort int    `json:"standard_ports"`
	ServicePorts int    `json:"service_ports"`
}

// UplinkPort is an uplink port with the VLANs tagged on it.
type UplinkPort struct {
	VLANs  []int `json:"vlans"`
	Native int   `json:"native"`
}

// VLANsResult is the result of vlans.
type VLANsResult struct {
	Count       int                   `json:"count"`
	VLANs       []VLAN                `json:"vlans"`
	UplinkPorts map[string]UplinkPort `json:"uplink_ports"`
}

// Car holds the traffic-table indexes of a service-port (rx = inbound,
// tx = outbound); -1 means none.
type Car struct {
	In  int `json:"in"`
	Out int `json:"out"`
}

// ServicePort is one subscriber flow.
type ServicePort struct {
	Index     int    `json:"index"`
	VLAN      int    `json:"vlan"`
	Attr      string `json:"attr,omitempty"`
	Type      string `json:"type,omitempty"`
	State     string `json:"state"`
	PON       string `json:"pon"`
	ONTID     int    `json:"ont_id"`
	Gem       int    `json:"gem"`
	FlowType  string `json:"flow_type"`
	UserVLAN  int    `json:"user_vlan"`
	InnerVLAN int    `json:"inner_vlan,omitempty"`
	Car       Car    `json:"car"`
}

// ServicePortsResult is the result of serviceports.
type ServicePortsResult struct {
	Count        int           `json:"count"`
	ServicePorts []ServicePort `json:"service_ports"`
}

// DBAProfile is one DBA profile; bandwidths in kbit/s.
type DBAProfile struct {
	ID       int    `json:"id"`
	Name     string `json:"name,omitempty"`
	Type     int    `json:"type"`
	Fix      int    `json:"fix"`
	Assure   int    `json:"assure"`
	Max      int    `json:"max"`
	Bindings int    `json:"bindings"`
}

// Profile is a line or service profile.
type Profile struct {
	ID       int    `json:"id"`
	Name     string `json:"name"`
	Bindings int    `json:"bindings"`
}

// TrafficTable is one IP traffic table (a rate limit); rates in kbit/s,
// -1 for `off`.
type TrafficTable struct {
	Index int    `json:"index"`
	Name  string `json:"name,omitempty"`
	CIR   int    `json:"cir"`
	PIR   int    `json:"pir"`
	CBS   int    `json:"cbs,omitempty"`
	PBS   int    `json:"pbs,omitempty"`
	Pri   int    `json:"priority"`
}

// ProfilesResult is the result of profiles. TrafficTables is an addition
// to the spec's {dba, line, service}: the rate tables plans are built on.
type ProfilesResult struct {
	DBA           []DBAProfile   `json:"dba"`
	Line          []Profile      `json:"line"`
	Service       []Profile      `json:"service"`
	TrafficTables []TrafficTable `json:"traffic_tables"`
}

// ConfigResult is the result of config.
type ConfigResult struct {
	Lines  int    `json:"lines"`
	Config string `json:"config"`
}

// RunArgs are the arguments of run.
type RunArgs struct {
	Options
	Command string `json:"command"`
}

// RunResult is the result of run.
type RunResult struct {
	Command string `json:"command"`
	Output  string `json:"output"`
}

// AuditArgs are the arguments of audit.
type AuditArgs struct {
	Options
	SVLAN int      `json:"svlan"`
	Ports []string `json:"ports,omitempty"`
}

// AuditUplink is an uplink port carrying the audited S-VLAN.
type AuditUplink struct {
	Port       string `json:"port"`
	NativeVLAN int    `json:"native_vlan"`
	State      string `json:"state"`
}

// Rate is a traffic table's committed and peak rate in kbit/s.
type Rate struct {
	CIR int `json:"cir"`
	PIR int `json:"pir"`
}

// AuditResult is what the OLT holds for this router on its S-VLAN.
type AuditResult struct {
	SVLAN        int             `json:"svlan"`
	Exists       bool            `json:"exists"`
	Type         string          `json:"type"`
	Attribute    string          `json:"attribute"`
	Uplinks      []AuditUplink   `json:"uplinks"`
	ServicePorts []ServicePort   `json:"service_ports"`
	Option82     bool            `json:"option82"`
	Rates        map[string]Rate `json:"rates"`
	ONTs         []ONT           `json:"onts"`
	PlanPrefix   string          `json:"plan_prefix"`
}

// BoardsResult is the result of boards.
type BoardsResult struct {
	Count  int     `json:"count"`
	Boards []Board `json:"boards"`
}

// PortArgs name one PON port ("0/1/0"); empty means every port.
type PortArgs struct {
	Options
	Port string `json:"port,omitempty"`
}

// PONPort is a PON port and its state.
type PONPort struct {
	Port          string `json:"port"`
	Type          string `json:"type"`
	MinDistanceKM int    `json:"min_distance_km"`
	MaxDistanceKM int    `json:"max_distance_km"`
	OpticalModule string `json:"optical_module"`
}

// PONPortsResult is the result of pon-ports.
type PONPortsResult struct {
	Count int       `json:"count"`
	Ports []PONPort `json:"ports"`
}

// PortOptical is the reading of a PON port's own transceiver.
type PortOptical struct {
	Port         string  `json:"port"`
	Module       string  `json:"module"`
	TxPowerDBm   float64 `json:"tx_power_dbm"`
	TemperatureC float64 `json:"temperature_c"`
	VoltageV     float64 `json:"voltage_v"`
	BiasMA       float64 `json:"bias_ma"`
}

// PortOpticalResult is the result of port-optical.
type PortOpticalResult struct {
	Count int           `json:"count"`
	Ports []PortOptical `json:"ports"`
}

// CountersArgs are the arguments of counters.
type CountersArgs struct {
	Options
	Port    string `json:"port,omitempty"`
	ONTID   *int   `json:"ont_id,omitempty"`
	Uplinks bool   `json:"uplinks,omitempty"`
	ONTs    bool   `json:"onts,omitempty"`
}

// Counter is the traffic counters of one port or ONT, keyed by the
// OLT's own counter names in snake_case.
type Counter struct {
	Port   string           `json:"port"`
	ONTID  *int             `json:"ont_id,omitempty"`
	Kind   string           `json:"kind"` // pon, uplink, ont
	Values map[string]int64 `json:"values"`
}

// CountersResult is the result of counters.
type CountersResult struct {
	Count    int       `json:"count"`
	Counters []Counter `json:"counters"`
}

// ONTOpticalArgs are the arguments of ont-optical; ONTID nil means all.
type ONTOpticalArgs struct {
	Options
	Port  string `json:"port"`
	ONTID *int   `json:"ont_id,omitempty"`
}

// ONTOptical is one ONT's optical reading; nil values are those the OLT
// printed as `-` (an offline ONT).
type ONTOptical struct {
	ID           int      `json:"id"`
	RxPowerDBm   *float64 `json:"rx_power_dbm"`
	TxPowerDBm   *float64 `json:"tx_power_dbm"`
	OLTRxDBm     *float64 `json:"olt_rx_power_dbm,omitempty"`
	TemperatureC *float64 `json:"temperature_c"`
	VoltageV     *float64 `json:"voltage_v"`
	CurrentMA    *float64 `json:"current_ma,omitempty"`
	DistanceM    *int     `json:"distance_m,omitempty"`
}

// ONTOpticalResult is the result of ont-optical.
type ONTOpticalResult struct {
	Port string       `json:"port"`
	ONTs []ONTOptical `json:"onts"`
}

// ---- changing operations ----

// WriteResult is what every changing operation reports besides its own
// fields: the changing commands it sent (or, under dry_run, would send)
// and the OLT's answers that were not errors.
type WriteResult struct {
	DryRun   bool     `json:"dry_run,omitempty"`
	Commands []string `json:"commands"`
	Output   string   `json:"output,omitempty"`
}

// ExecArgs are the arguments of exec (not shown by the spec): Commands are
// sent in config mode, one after another, stopping at the first error.
type ExecArgs struct {
	Options
	Commands []string `json:"commands"`
}

// ExecResult is the result of exec.
type ExecResult struct {
	WriteResult
	Outputs []RunResult `json:"outputs"`
}

// VLANAddArgs are the arguments of vlan-add.
type VLANAddArgs struct {
	Options
	VLAN        int      `json:"vlan"`
	Type        string   `json:"type,omitempty"`
	Attribute   string   `json:"attribute,omitempty"`
	Description string   `json:"description,omitempty"`
	Uplinks     []string `json:"uplinks,omitempty"`
}

// VLANDelArgs are the arguments of vlan-del.
type VLANDelArgs struct {
	Options
	VLAN    int      `json:"vlan"`
	Uplinks []string `json:"uplinks,omitempty"`
}

// VLANResult is the result of vlan-add and vlan-del.
type VLANResult struct {
	WriteResult
	VLAN    int      `json:"vlan"`
	Uplinks []string `json:"uplinks"`
}

// PortVLANArgs are the arguments of port-vlan.
type PortVLANArgs struct {
	Options
	VLAN   int    `json:"vlan"`
	Port   string `json:"port"`
	Remove bool   `json:"remove,omitempty"`
}

// PortVLANResult is the result of port-vlan.
type PortVLANResult struct {
	WriteResult
	VLAN   int    `json:"vlan"`
	Port   string `json:"port"`
	Tagged bool   `json:"tagged"`
}

// ProfileArgs are the arguments of profile-add and profile-del (not shown
// by the spec; see the package README). Kind is dba, line, service or
// traffic.
type ProfileArgs struct {
	Options
	Kind string `json:"kind"`
	ID   *int   `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
	// dba: type-4 max rate; traffic: CIR = PIR.
	Kbps int `json:"kbps,omitempty"`
	// line: DBA profile of T-CONT 1, GEM port and the VLAN mapped on it.
	DBAProfileID int `json:"dba_profile_id,omitempty"`
	Gemport      int `json:"gemport,omitempty"`
	VLAN         int `json:"vlan,omitempty"`
	// service: number of Ethernet ports.
	ETHPorts int `json:"eth_ports,omitempty"`
}

// ProfileResult is the result of profile-add and profile-del.
type ProfileResult struct {
	WriteResult
	Kind string `json:"kind"`
	ID   int    `json:"id"`
	Name string `json:"name,omitempty"`
}

// Plan is a router plan as the caller resolved it: its name and rates.
// The driver applies the OLT headroom.
type Plan struct {
	Name     string `json:"name"`
	DownKbps int    `json:"down_kbps"`
	UpKbps   int    `json:"up_kbps"`
}

// ONTAddArgs are the arguments of ont-add.
type ONTAddArgs struct {
	Options
	Port        string `json:"port"`
	SN          string `json:"sn"`
	VLAN        int    `json:"vlan"`
	UserVLAN    int    `json:"user_vlan,omitempty"`
	Description string `json:"description,omitempty"`
	// Plan is the router plan named by the request's `plan`, resolved by
	// the caller (the driver does not know the router's plans; an unknown
	// name is the caller's 404).
	Plan        *Plan `json:"-"`
	DownKbps    int   `json:"down_kbps,omitempty"`
	UpKbps      int   `json:"up_kbps,omitempty"`
	LineProfile int   `json:"line_profile,omitempty"`
	SrvProfile  int   `json:"srv_profile,omitempty"`
	ProfileID   int   `json:"profile_id,omitempty"`
	SVLAN       int   `json:"svlan,omitempty"`
	IPTV        bool  `json:"iptv,omitempty"`
	IPTVVLAN    int   `json:"iptv_vlan,omitempty"`
	ETHPorts    int   `json:"eth_ports,omitempty"`
	Gemport     int   `json:"gemport,omitempty"`
}

// ONTAddResult is the result of ont-add. VLAN is the outer VLAN of the
// service-port (the S-VLAN when there is one), CVLAN the inner VLAN (the
// PON port's VLAN) when stacked, UserVLAN what the ONT sends.
type ONTAddResult struct {
	WriteResult
	Port     string `json:"port"`
	SN       string `json:"sn"`
	ONTID    int    `json:"ont_id"`
	VLAN     int    `json:"vlan"`
	CVLAN    int    `json:"cvlan,omitempty"`
	UserVLAN int    `json:"user_vlan"`
}

// ONTRefArgs name one ONT for ont-del, ont-reboot, ont-activate and
// ont-deactivate.
type ONTRefArgs struct {
	Options
	Port        string `json:"port"`
	ONTID       int    `json:"ont_id"`
	ExpectSVLAN int    `json:"expect_svlan,omitempty"`
}

// ONTDelResult is the result of ont-del.
type ONTDelResult struct {
	WriteResult
	Port                string `json:"port"`
	ONTID               int    `json:"ont_id"`
	Deleted             bool   `json:"deleted"`
	ServicePortsRemoved []int  `json:"service_ports_removed"`
}

// ONTRebootResult is the result of ont-reboot.
type ONTRebootResult struct {
	WriteResult
	Port     string `json:"port"`
	ONTID    int    `json:"ont_id"`
	Rebooted bool   `json:"rebooted"`
}

// ONTActiveResult is the result of ont-activate and ont-deactivate.
type ONTActiveResult struct {
	WriteResult
	Port   string `json:"port"`
	ONTID  int    `json:"ont_id"`
	Active bool   `json:"active"`
}

// ONTDescArgs are the arguments of ont-desc.
type ONTDescArgs struct {
	Options
	Port        string `json:"port"`
	ONTID       int    `json:"ont_id"`
	Description string `json:"description"`
}

// ONTDescResult is the result of ont-desc.
type ONTDescResult struct {
	WriteResult
	Port        string `json:"port"`
	ONTID       int    `json:"ont_id"`
	Description string `json:"description"`
}

// ONTReplanArgs are the arguments of ont-replan.
type ONTReplanArgs struct {
	Options
	Port        string `json:"port"`
	ONTID       int    `json:"ont_id"`
	Plan        string `json:"plan"`
	DownKbps    int    `json:"down_kbps"`
	UpKbps      int    `json:"up_kbps"`
	VLAN        int    `json:"vlan"`
	UserVLAN    int    `json:"user_vlan,omitempty"`
	SVLAN       int    `json:"svlan,omitempty"`
	ExpectSVLAN int    `json:"expect_svlan,omitempty"`
}

// ONTReplanResult is the result of ont-replan.
type ONTReplanResult struct {
	WriteResult
	Port         string `json:"port"`
	ONTID        int    `json:"ont_id"`
	ServicePorts []int  `json:"service_ports"`
	Car          Car    `json:"car"`
}

// NTPArgs are the arguments of ntp (not shown by the spec): the servers to
// add, or to remove with Remove.
type NTPArgs struct {
	Options
	Servers []string `json:"servers"`
	Remove  bool     `json:"remove,omitempty"`
}

// SysnameArgs are the arguments of sysname (not shown by the spec).
type SysnameArgs struct {
	Options
	Name string `json:"name"`
}

// PlanSyncArgs are the arguments of plan-sync (not shown by the spec):
// the router's plans, each made into a down and an up traffic table.
type PlanSyncArgs struct {
	Options
	Plans []Plan `json:"plans"`
}

// PlanTables is what plan-sync found or made for one plan.
type PlanTables struct {
	Plan      string `json:"plan"`
	DownIndex int    `json:"down_index"`
	UpIndex   int    `json:"up_index"`
	Created   int    `json:"created"`
}

// PlanSyncResult is the result of plan-sync.
type PlanSyncResult struct {
	WriteResult
	Plans []PlanTables `json:"plans"`
}

// InitArgs are the arguments of init (not shown by the spec): prepare an
// OLT for the router by creating its S-VLAN as a stacking VLAN tagged on
// Uplinks, and switching ONT autofind on for every PON port.
type InitArgs struct {
	Options
	SVLAN   int      `json:"svlan,omitempty"`
	Uplinks []string `json:"uplinks,omitempty"`
}
