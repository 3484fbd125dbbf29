package api

import "time"

// The system service (Document 1, System).

// Status is the status record of GET /status.
type Status struct {
	API           string           `json:"api" doc:"fixed usage banner of the API"`
	RouterVersion string           `json:"router_version" doc:"router software version (date style)"`
	DHCPService   string           `json:"dhcp_service" doc:"running when a dhcp service answers discovery, else stopped"`
	TotalClients  int64            `json:"total_clients" doc:"registered per-MAC clients"`
	OnlineClients int64            `json:"online_clients" doc:"clients whose address is a live neighbour now"`
	PerNetwork    map[string]int64 `json:"per_network" doc:"network (CIDR) to client count"`
	Interfaces    int              `json:"interfaces" doc:"interface count of the router's namespace"`
	Antispoof     string           `json:"antispoof" doc:"strict, dynamic or off"`
	ServerTime    string           `json:"server_time" doc:"YYYY-MM-DD HH:MM:SS" example:"2026-11-24 10:00:00"`
}

// StatusGet is GET /status.
var StatusGet = Define[None, Status](Meta{
	Service: "system", Name: "status.get",
	Summary: "Status record. Fields another service owns are zero (or `off`/`stopped`) while that service is not running; `dhcp_service` is `running` when a dhcp service answers discovery.",
	REST:    []REST{{"GET", "/status"}}, Action: "status", Read: true,
	Concurrency: 32,
})

// Configuration documents (Document 1, "Saved configuration version").
//
// The configuration every service keeps in etcd is rendered as named
// documents, one file path per area (etc/plans.json, etc/routes.json,
// etc/dhcp.json, ...), each the owning service's own rendering as indented
// JSON. Saved versions, config-diff, config-show, GET /backup and POST
// /restore all speak in these documents. Only the owner reads and writes
// its etcd keys: the system service asks each owner on the bus
// (ConfigOwners: <service>.config.export and <service>.config.import).
// State (leases, counters) is not configuration and is not exported.

// ConfigDocuments are named configuration documents: file path to content.
// A document that grows with the number of subscribers travels as an
// object instead (Objects): its text is streamed into ConfigBucket by the
// sender and read back as a stream by the receiver, so neither holds it
// whole and no bus message carries it. The system service owns the
// objects' lifetime (it deletes them once a backup or restore is done;
// those a dead process left expire).
//
// Restore is set by a restore, whose owners import beside each other
// (ConfigOwner.BesidePrevious): an owner whose import is followed by work
// reading another owner's configuration (the subscribers' reconcile of
// their clients' effects reads dhcp's reservations) holds that work until
// the system service's event.ConfigRestored with this id, so that it does
// not read, and remake one by one, what the other's import is still
// writing.
type ConfigDocuments struct {
	Documents map[string]string       `json:"documents" doc:"file path (e.g. etc/plans.json) to the document's text (indented JSON)"`
	Objects   map[string]ConfigObject `json:"objects,omitempty" doc:"file path to the object in ConfigBucket holding the document's text"`
	Restore   string                  `json:"restore,omitempty" doc:"the restore this import is part of: work reading other owners' configuration waits for its config.restored event"`
}

// ConfigObject names a document's text in ConfigBucket.
type ConfigObject struct {
	Object string `json:"object"`
	Bytes  int64  `json:"bytes"`
}

// ConfigBucket is the JetStream object store configuration documents
// travel through as objects (ConfigDocuments.Objects).
const ConfigBucket = "ROUTER_CONFIG_DOCS"

// ConfigImported answers an owner's config.import: the documents it took.
// A message is a problem: the restore reports it and rolls back.
type ConfigImported struct {
	Result
	Documents []string `json:"documents" doc:"paths of the documents the service brought in"`
}

// ConfigOwner is one service that owns configuration documents, with its
// two internal operations.
type ConfigOwner struct {
	Service string
	// Export renders the service's configuration as its documents (every
	// path it owns, also when empty). A stored record that does not parse
	// is a 500 listing it in broken_data_files.
	Export Op[None, ConfigDocuments]
	// Import replaces the service's configuration with the documents of
	// its paths (a small document in one etcd transaction; a streamed
	// per-subscriber document by writing only what differs, in several
	// transactions), then re-applies its kernel and daemon state; paths of other services are ignored and a path of its
	// own that is absent leaves that area as it is. A document that does
	// not parse or validate is a 400 naming it, and nothing changes.
	Import Op[ConfigDocuments, ConfigImported]
	// Streamed are the owner's paths it takes on import as objects
	// (ConfigDocuments.Objects; the per-subscriber documents); its other
	// paths come as text.
	Streamed []string
	// BesidePrevious lets a restore import this owner at the same time
	// as the one before it in the order (and that one's own
	// BesidePrevious group): their keys are disjoint and neither's import
	// reads the other's configuration; what does read it afterwards waits
	// for the restore's end (ConfigDocuments.Restore).
	BesidePrevious bool
}

// withPrevious is o imported beside the owner before it.
func withPrevious(o ConfigOwner) ConfigOwner {
	o.BesidePrevious = true
	return o
}

func configOwner(service, paths string, streamed ...string) ConfigOwner {
	return ConfigOwner{Service: service, Streamed: streamed,
		// One attempt as long as the whole timeout: rendering 100,000
		// records takes seconds, and a read asked again after the default
		// attempt would start a second rendering beside the first.
		Export: Define[None, ConfigDocuments](Meta{
			Service: service, Name: "config.export", Read: true, Timeout: 45 * time.Second, Attempt: 45 * time.Second,
			Summary: "The service's configuration as named documents (" + paths + ") for saved versions, backup and restore.",
		}),
		Import: Define[ConfigDocuments, ConfigImported](Meta{
			Service: service, Name: "config.import", Timeout: 60 * time.Second,
			Summary: "Replace the service's configuration (" + paths + ") with the documents given (a small document in one etcd transaction, a per-subscriber document by writing only what differs), then re-apply its kernel state; 400 naming a document that does not parse.",
		}),
	}
}

// The owners of configuration documents, in the order a restore brings
// them in (routes before what depends on them). The DHCP reservations and
// the clients import at the same time: 100,000 of each are the two
// largest imports, into an emptied router 2.2-3.4 s and 7-12 s one after
// the other (etcd's apply, one goroutine, took a third of the CPU, and a
// third of the two cores was idle). The clients' import holds the
// subscribers' reconcile of their effects until the restore's end, so
// that it finds the reservations in place rather than making each one
// again while dhcp's import writes them (101 s when it did).
var (
	SubscribersConfig = withPrevious(configOwner("subscribers", "etc/plans.json, etc/clients.json", "etc/clients.json"))
	NetcfgConfig      = configOwner("netcfg", "etc/routes.json")
	DHCPConfig        = configOwner("dhcp", "etc/dhcp.json, etc/dhcp-reservations.json", "etc/dhcp-reservations.json")
	RoutingConfig     = configOwner("routing", "etc/routing.json")
	OLTRegistryConfig = configOwner("olt", "etc/olts.json")
	ConfigOwners      = []ConfigOwner{NetcfgConfig, DHCPConfig, SubscribersConfig, FirewallConfig, CGNATConfig, RoutingConfig, OLTRegistryConfig, SNMPConfig}
)

// ConfigVersion is one saved configuration version.
type ConfigVersion struct {
	ID      int64  `json:"id" example:"7"`
	SavedAt string `json:"saved_at" example:"2026-11-24 10:00:00"`
	SavedBy string `json:"saved_by" doc:"who saved it: the caller's address, by@address when the caller sent by; router for automatic versions" example:"noc@192.0.2.10"`
	Comment string `json:"comment"`
	Auto    bool   `json:"auto" doc:"saved by the router itself (before a restore, by a network apply)"`
	Files   int    `json:"files" doc:"number of documents"`
	Bytes   int64  `json:"bytes" doc:"their total size"`
	Digest  string `json:"digest" doc:"sha256 over the documents' paths and contents: equal digests, equal configurations"`
}

// ConfigSavedRef is the latest saved version in config-status.
type ConfigSavedRef struct {
	ID      int64  `json:"id"`
	SavedAt string `json:"saved_at"`
	Comment string `json:"comment"`
}

// ConfigChanges lists documents by path.
type ConfigChanges struct {
	Added   []string `json:"added"`
	Removed []string `json:"removed"`
	Changed []string `json:"changed"`
}

// ConfigStatusAnswer answers config-status.
type ConfigStatusAnswer struct {
	Result
	Saved   *ConfigSavedRef `json:"saved" doc:"the latest saved version; null when none is saved"`
	Latest  int64           `json:"latest" doc:"id of the latest saved version; 0 when none"`
	Unsaved bool            `json:"unsaved" doc:"the running configuration differs from the latest saved version (true when none is saved)"`
	Changes ConfigChanges   `json:"changes" doc:"running against the latest saved version"`
}

// ConfigVersionsRequest is config-versions.
type ConfigVersionsRequest struct {
	N int `json:"n" api:"min=1,max=1000,default=30" doc:"how many of the newest versions"`
}

// ConfigVersionList answers config-versions, newest first.
type ConfigVersionList struct {
	Result
	Count    int             `json:"count"`
	Versions []ConfigVersion `json:"versions"`
}

// ConfigSaveRequest is config-save.
type ConfigSaveRequest struct {
	Comment string `json:"comment" api:"maxlen=200"`
}

// ConfigSaveAnswer answers config-save (201).
type ConfigSaveAnswer struct {
	Result
	Saved   ConfigVersion `json:"saved"`
	Version int64         `json:"version" doc:"the new version's id"`
	Files   int           `json:"files" doc:"documents saved"`
}

// ConfigDiffRequest is config-diff.
type ConfigDiffRequest struct {
	From int64  `json:"from" api:"required,min=1" doc:"version id"`
	To   string `json:"to" api:"default=running" pattern:"^([0-9]+|running)$" hint:"a version id or running"`
}

// ConfigDiffAnswer answers config-diff.
type ConfigDiffAnswer struct {
	Result
	From    int64         `json:"from"`
	To      any           `json:"to" doc:"the version id, or running"`
	Changes ConfigChanges `json:"changes"`
	Diff    string        `json:"diff" doc:"unified diff of the documents, secrets masked; empty when equal"`
}

// ConfigShowRequest is config-show.
type ConfigShowRequest struct {
	ID   int64  `json:"id" api:"required,min=1" doc:"version id"`
	Path string `json:"path" doc:"one document's path; omitted lists the documents"`
}

// ConfigFile is one document of a version.
type ConfigFile struct {
	Path   string `json:"path" example:"etc/plans.json"`
	Bytes  int    `json:"bytes"`
	Digest string `json:"digest"`
}

// ConfigShowAnswer answers config-show: the version's documents, or one
// document's content with passwords, keys, tokens and communities masked.
type ConfigShowAnswer struct {
	Result
	Version ConfigVersion `json:"version"`
	Files   []ConfigFile  `json:"files,omitempty" doc:"without path"`
	Path    string        `json:"path,omitempty" doc:"with path"`
	Content string        `json:"content,omitempty" doc:"with path: the document, secrets masked"`
}

var (
	// ConfigStatus is the config-status action.
	ConfigStatus = Define[None, ConfigStatusAnswer](Meta{
		Service: "system", Name: "config.status", Action: "config-status", Read: true,
		Summary: "Whether the running configuration differs from the latest saved version, and which documents. Action API only.",
	})
	// ConfigVersions is the config-versions action.
	ConfigVersions = Define[ConfigVersionsRequest, ConfigVersionList](Meta{
		Service: "system", Name: "config.versions", Action: "config-versions", Read: true,
		Summary: "The newest saved configuration versions, newest first. Action API only.",
	})
	// ConfigSave is the config-save action (POST only).
	ConfigSave = Define[ConfigSaveRequest, ConfigSaveAnswer](Meta{
		Service: "system", Name: "config.save", Action: "config-save", ActionPOSTOnly: true, Status: 201,
		Summary: "Save the running configuration as a new numbered version (201). POST only (GET is 405); a JSON body's fields win over the query's. Action API only.",
	})
	// ConfigDiff is the config-diff action.
	ConfigDiff = Define[ConfigDiffRequest, ConfigDiffAnswer](Meta{
		Service: "system", Name: "config.diff", Action: "config-diff", Read: true,
		Summary: "Unified diff from a saved version to another or to the running configuration, secrets masked; 404 for a missing version. Action API only.",
	})
	// ConfigShow is the config-show action.
	ConfigShow = Define[ConfigShowRequest, ConfigShowAnswer](Meta{
		Service: "system", Name: "config.show", Action: "config-show", Read: true,
		Summary: "A saved version's documents, or one document with passwords, keys, tokens and communities masked; 404 for a missing version or document. Action API only.",
	})
)

// Backup and restore (Document 1, System).

// BackupArchive documents GET /backup's answer: not JSON but a .tar.gz.
type BackupArchive struct {
	Archive string `json:"-" doc:"application/gzip: etc/ (the configuration documents, as config-show names them, secrets as stored, i.e. sealed) and data/ (etcd.snapshot: a consistent copy of the configuration database at one revision, through etcd's maintenance API; manifest.json: time, revision, router version, documents' digest)"`
}

// RestoreRequest is POST /restore.
type RestoreRequest struct {
	File string `json:"file" api:"required" doc:"path of a .tar.gz archive already on the router (GET /backup's, or an undo_file)"`
}

// RestoreAnswer answers POST /restore.
type RestoreAnswer struct {
	Result
	Documents   []string `json:"documents" doc:"configuration documents brought in"`
	UndoVersion int64    `json:"undo_version" doc:"the configuration before the restore, saved as this version"`
	UndoFile    string   `json:"undo_file" doc:"an archive of undo_version on the router: POST /restore with it to go back"`
}

var (
	// BackupGet is GET /backup.
	BackupGet = Define[None, BackupArchive](Meta{
		Service: "system", Name: "backup.get", REST: []REST{{"GET", "/backup"}}, Read: true, Timeout: 60 * time.Second, Attempt: 60 * time.Second,
		Summary: "A .tar.gz (application/gzip, Content-Disposition with a timestamped file name) of etc/ (the configuration documents) and data/ (an etcd snapshot taken at one revision, and a manifest). 500 {error, detail} on failure. The archive is made as a stream, put in chunks in the bus's object store (ROUTER_ARCHIVES) and streamed by the gateway to the client: never whole in memory nor in one bus message. No action form.",
	})
	// Restore is POST /restore.
	Restore = Define[RestoreRequest, RestoreAnswer](Meta{
		Service: "system", Name: "restore", REST: []REST{{"POST", "/restore"}}, Timeout: 120 * time.Second,
		Summary: "Bring in the configuration documents of an archive on the router: the running configuration is first saved as `undo_version` (and written as `undo_file`); each owning service replaces its configuration (writing only what differs) and re-applies its kernel state. 400 when the file is missing, too large (256 MiB), not a tar.gz, or holds a path outside etc/ and data/ (nothing changes); 500 with `undo_version`, `next` and `rolled_back` when not every document could be brought in: the configuration before the restore is then brought back into every owner (all or nothing). No action form.",
	})
)

// Doctor and alerts (Document 1, "Doctor finding", "Alert").

// Finding is one thing the doctor found.
type Finding struct {
	Severity string `json:"severity" doc:"critical, warning or info"`
	Area     string `json:"area" example:"dhcp"`
	Problem  string `json:"problem"`
	Detail   string `json:"detail"`
	Fix      string `json:"fix" doc:"what an operator can do about it"`
}

// DoctorRequest is GET /doctor.
type DoctorRequest struct {
	OLT bool `json:"olt" doc:"1: also check each registered OLT against the router's records (not built yet: reported as an info finding)"`
}

// SeverityCounts counts findings by severity.
type SeverityCounts struct {
	Critical int `json:"critical"`
	Warning  int `json:"warning"`
	Info     int `json:"info"`
}

// DoctorAnswer answers GET /doctor (always 200).
type DoctorAnswer struct {
	OK        bool           `json:"ok" doc:"true when there is no critical finding"`
	Code      int            `json:"code" doc:"always 200"`
	Generated string         `json:"generated" example:"2026-11-24 10:00:00"`
	Count     int            `json:"count"`
	Counts    SeverityCounts `json:"counts"`
	Findings  []Finding      `json:"findings"`
}

// Alert is one alert of GET /alerts.
type Alert struct {
	Severity string `json:"severity" doc:"critical, warning or info"`
	Type     string `json:"type" doc:"dhcp, interface, dhcp-pool, stranger, cgnat, spoof, olt, fiber or licence"`
	Message  string `json:"message"`
	OLT      string `json:"olt,omitempty" doc:"OLT and fibre alerts"`
	Port     string `json:"port,omitempty" doc:"fibre alerts"`
	ONT      string `json:"ont,omitempty" doc:"fibre alerts"`
}

// AlertList answers GET /alerts.
type AlertList struct {
	Count     int     `json:"count"`
	Generated string  `json:"generated"`
	Alerts    []Alert `json:"alerts"`
}

var (
	// DoctorGet is GET /doctor.
	DoctorGet = Define[DoctorRequest, DoctorAnswer](Meta{
		Service: "system", Name: "doctor.get", REST: []REST{{"GET", "/doctor"}}, Action: "doctor", Read: true,
		// olt=1 audits each registered OLT (up to 45 s); the rest answer
		// within 3 s each.
		Timeout: 60 * time.Second, Attempt: 55 * time.Second,
		Summary: "Checks gathered concurrently, each within a deadline (a service that does not answer is itself a finding): services missing from the bus, DHCP not running or its configuration refused, stored configuration documents that do not parse, NATS and etcd health (etcd alarms such as NOSPACE), free space of the state directory, clock synchronisation, the licence, configuration not saved. `olt=1` also audits each registered OLT on its S-VLAN (read only, concurrently, within 45 s): the S-VLAN missing, no uplink carrying it or all down, option 82 not inserted, service ports down. Always 200; `ok` is false on any critical finding.",
	})
	// AlertsGet is GET /alerts.
	AlertsGet = Define[None, AlertList](Meta{
		Service: "system", Name: "alerts.get", REST: []REST{{"GET", "/alerts"}}, Action: "alerts", Read: true,
		Timeout: 20 * time.Second, Attempt: 15 * time.Second,
		Summary: "Alerts of the spec's types: from the doctor's critical and warning findings of those areas (dhcp, licence: missing, invalid, expired or expiring within 14 days; ...) and from recent events: olt (an OLT whose latest olt.unreachable has no olt.reachable after it, last day), fiber (an ONT whose latest event of the last hour is ont.offline or ont.optical; with olt, port, ont), stranger (device.unknown in the last hour).",
	})
)

// Alarm register and health readings (Document 1: "an alarm register with
// health readings"; their endpoints are not shown, so designed here in the
// spirit of the rest: reads are GET with filters in the query, the one
// change is a POST; no action form, as the spec says).

// AlarmRecord is one alarm: raised when the doctor's periodic run finds a
// critical or warning problem, cleared when it no longer finds it.
type AlarmRecord struct {
	ID             int64  `json:"id"`
	Severity       string `json:"severity" doc:"critical or warning"`
	Area           string `json:"area"`
	Problem        string `json:"problem"`
	Detail         string `json:"detail" doc:"as last seen"`
	Fix            string `json:"fix"`
	RaisedAt       string `json:"raised_at" example:"2026-11-24 10:00:00"`
	ClearedAt      string `json:"cleared_at" doc:"empty while active"`
	AcknowledgedAt string `json:"acknowledged_at" doc:"empty until acknowledged"`
	AcknowledgedBy string `json:"acknowledged_by" doc:"by@caller of the acknowledgement"`
}

// AlarmFilter is GET /alarms.
type AlarmFilter struct {
	State string `json:"state" api:"enum=active|cleared|unacknowledged|all,default=all" doc:"which alarms"`
	N     int    `json:"n" api:"min=1,max=1000,default=100" doc:"newest first, at most n"`
}

// AlarmList answers GET /alarms.
type AlarmList struct {
	Count  int           `json:"count"`
	Active int           `json:"active" doc:"alarms not cleared, of all (not only those listed)"`
	Alarms []AlarmRecord `json:"alarms"`
}

// AlarmRef names one alarm.
type AlarmRef struct {
	ID int64 `json:"id" api:"required,min=1"`
}

// AlarmAckAnswer answers POST /alarms/{id}/ack.
type AlarmAckAnswer struct {
	Result
	Alarm AlarmRecord `json:"alarm"`
}

// HealthReading is one sample of the router's health.
type HealthReading struct {
	Time          string            `json:"time" example:"2026-11-24 10:00:00"`
	CPUPercent    float64           `json:"cpu_percent" doc:"busy share of all CPUs since the previous sample"`
	Load1         float64           `json:"load1"`
	MemoryPercent float64           `json:"memory_percent" doc:"used (total less available)"`
	DiskPercent   float64           `json:"disk_percent" doc:"used share of the state directory's file system"`
	TemperatureC  *float64          `json:"temperature_c" doc:"hottest thermal zone; null where the hardware has no sensor"`
	Services      map[string]string `json:"services" doc:"service name to up or down (on the bus)"`
}

// HealthFilter is GET /health.
type HealthFilter struct {
	Minutes int `json:"minutes" api:"min=1,max=1440,default=60" doc:"readings of the last minutes (kept for a day)"`
}

// HealthList answers GET /health.
type HealthList struct {
	Count    int             `json:"count"`
	Every    int             `json:"every_seconds" doc:"sampling interval"`
	Readings []HealthReading `json:"readings" doc:"oldest first"`
}

var (
	// AlarmsList is GET /alarms.
	AlarmsList = Define[AlarmFilter, AlarmList](Meta{
		Service: "system", Name: "alarms.list", REST: []REST{{"GET", "/alarms"}}, Read: true,
		Summary: "The alarm register, newest first: alarms raised and cleared by the doctor's run each sampling interval (critical and warning findings), with who acknowledged them. No action form.",
	})
	// AlarmsAck is POST /alarms/{id}/ack.
	AlarmsAck = Define[AlarmRef, AlarmAckAnswer](Meta{
		Service: "system", Name: "alarms.ack", REST: []REST{{"POST", "/alarms/{id}/ack"}},
		Summary: "Acknowledge an alarm (records the time and by@caller; acknowledging again keeps the first); 404 when there is none. No action form.",
	})
	// HealthGet is GET /health.
	HealthGet = Define[HealthFilter, HealthList](Meta{
		Service: "system", Name: "health.list", REST: []REST{{"GET", "/health"}}, Read: true,
		Summary: "Health readings (CPU, load, memory, disk of the state directory, temperature where there are sensors, each service up or down), sampled every minute and kept for a day. No action form.",
	})
)

// Archives too large for one bus message travel through the JetStream
// object store: the service puts the archive in ArchiveBucket, streamed in
// chunks, and answers with no body and ArchiveObjectHeader naming the
// object; the gateway streams the object to the HTTP client and deletes it.
const (
	ArchiveBucket       = "ROUTER_ARCHIVES"
	ArchiveObjectHeader = "X-Router-Archive-Object"
)

// ConfigAutoSaveRequest asks the system service to save the running
// configuration as an automatic version.
type ConfigAutoSaveRequest struct {
	Comment string `json:"comment" api:"maxlen=200" doc:"why, e.g. network apply"`
}

// ConfigAutoSave saves an automatic version (auto true); services call it
// after a change the spec says is saved by itself (a network apply). Not
// on HTTP.
var ConfigAutoSave = Define[ConfigAutoSaveRequest, ConfigSaveAnswer](Meta{
	Service: "system", Name: "config.autosave", Status: 201,
	Summary: "Save the running configuration as an automatic version (auto true, saved_by the caller of the calling service), e.g. after a network apply.",
})
