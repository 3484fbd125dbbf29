package api

import "slices"

// Table is every operation of the API, in one readable place. The gateway
// mounts the REST and action forms of each; docs/openapi.yaml is generated
// from it. An operation missing from here is answered as unknown, never
// routed to a service that is not built. The graph service's operations
// are SNMPOps (snmp.go) and GraphOps (graph.go).
var Table = slices.Concat([]Operation{
	// System (Document 1).
	StatusGet,
	// Saved configuration versions (action API only) and each owner's
	// configuration documents (Document 1, system).
	ConfigStatus, ConfigVersions, ConfigSave, ConfigDiff, ConfigShow, BackupGet, Restore, DoctorGet, AlertsGet,
	AlarmsList, AlarmsAck, HealthGet, ConfigAutoSave,
	SubscribersConfig.Export, SubscribersConfig.Import, NetcfgConfig.Export, NetcfgConfig.Import,
	DHCPConfig.Export, DHCPConfig.Import, RoutingConfig.Export, RoutingConfig.Import, OLTRegistryConfig.Export, OLTRegistryConfig.Import,

	// Plans (Document 2).
	PlansList, PlansPut, PlansDelete, ClientsSummary, PlansGet,

	// Clients (Document 2; subscribers).
	ClientsPage, ClientsList, ClientsSearch, ClientsGet, ClientsAdd, ClientsDelete,
	ClientsSetPlan, ClientsSuspend, ClientsResume, ClientsExpires,
	ClientsActive, ClientsConnected, Clients6, IPsGet,

	// Fibre services (Document 2; subscribers).
	ServicesUnregistered,

	// Shaping (no HTTP of its own; shaper).
	ShaperSet, ShaperRemove, ShaperPlan, ShaperPage, ShaperStatus, ShaperCounters,

	// Protection, bans, suspension blocks, anti-spoofing (firewall).
	FirewallBlock, FirewallUnblock, FirewallBlocks, FirewallAuthFailed,
	ProtectGet, ProtectAddOp, ProtectDeleteOp, ProtectDeleteChecked, Fail2banGet, Fail2banShow, Fail2banUnbanOp,
	FirewallGet, FirewallFullGet,
	AntispoofGet, AntispoofSetOp, AntispoofIfaceOp, AntispoofIfaceDelete, AntispoofLogGet, AntispoofSyncOp, AntispoofModeGet,
	FirewallConfig.Export, FirewallConfig.Import,

	// NAT pools, CGNAT, port forwards (cgnat).
	CGNATUses, CGNATIfaceRemove,
	NATListOp, NATAddOp, NATDelOp, PFList, PFAdd, PFDel, CGNATGet, CGNATSetOp, CGNATLookupOp, CGNATConfig.Export, CGNATConfig.Import,

	// Static routes (Document 2).
	RoutesList, RoutesCreate, RoutesDelete, InterfacesCount,

	// VLANs, addresses, interfaces (Document 2).
	VLANsList, VLANsCreate, VLANsDelete, VLANsDisable, VLANsEnable,
	AddrAdd, AddrDelete, AddrOther, IfaceListOp,

	// The router's own network configuration (Document 1; netcfg).
	NetworkGet, NetworkPlanOp, NetworkApplyOp, NetworkConfirmOp, NetworkRollbackOp, NetworkAdoptOp,
	NetVLANCheckOp, NetVLANAddOp, NetVLANDisableOp, NetVLANEnableOp, NetVLANDeleteOp, NetIPCheckOp, NetIPAddOp, NetIPDeleteOp,

	// DHCP (Document 2; not on HTTP yet).
	LeasesList, LeasesGet, PDSync, DHCPStatus,

	// Routing: BGP and OSPF through BIRD (Document 1).
	BGPGet, BGPSetOp, BGPPeerAddOp, BGPPeerDelOp, BGPPeerEnOp, BGPPeerDisOp,
	BGPAnnAddOp, BGPAnnDelOp, BGPBhAddOp, BGPBhDelOp, OSPFSetOp, OSPFIfAddOp,
	OSPFIfDelOp, BGPConfirmOp, BGPUndoOp, BGPUnknownOp,
	// Served networks and reservations (dhcp; Document 2).
	NetworksList, InterfacesList, NetAdd, NetDelete, DHCPReload, DHCPUnknown,
	ReservationPutClient, ReservationPutService, ReservationDelete, ReservationsList, ServingSetOp,
	Net6Add, Net6Delete, Net6Pool, Net6Lease, Net6DNS,
	PDGet, PDAdd, PDResize, PDDelete, PDAssignOp, PDUnassignOp,
	DNSGet, DNSSetOp, DNSIfaceDelete, DNSClearOp, Option82Get, Option82SetOp,

	// OLT operations and the OLT registry (olt; Document 3).
	OLTUsageGet, OLTUnknownOp, OLTsList, OLTsAdd, OLTsSet, OLTsDelete,
	OLTBackupOp, OLTBackupsList, OLTDiffOp, OLTSyncOp, OLTSyncStart,
	OLTInfo, OLTAutofind, OLTONUs, OLTVLANs, OLTServicePorts, OLTProfiles, OLTConfig, OLTRunOp,
	OLTAuditOp, OLTBoards, OLTPONPorts, OLTPortOptical, OLTCountersOp, OLTExecOp, OLTVLANAddOp,
	OLTVLANDelOp, OLTPortVLANOp, OLTProfileAdd, OLTProfileDel, OLTONTAddOp, OLTONTDel, OLTONTReboot,
	OLTONTDescOp, OLTONTOpticalOp, OLTNTPOp, OLTSysnameOp, OLTSave, OLTPlanSyncOp, OLTInitOp,
	OLTONTActivate, OLTONTDeactivate, OLTONTReplanOp,
}, SNMPOps, GraphOps)
