package api

// The firewall service: its own nftables tables (allow-list, bans,
// suspension blocks, anti-spoofing). This file holds the operations other
// services call; the HTTP ones (/protect, /fail2ban, /firewall,
// /antispoof) are declared with them.

// Block cuts one subscriber off: nothing it sends is forwarded, while DHCP
// still answers it (Document 2, "Client suspension").
type Block struct {
	ID    string `json:"id" api:"required" doc:"the subscriber: a client's MAC or a fibre service's id"`
	MAC   string `json:"mac" api:"format=mac"`
	IP    string `json:"ip" api:"required,format=ipv4"`
	IPv6  string `json:"ipv6" api:"format=cidr" doc:"IPv6 address or delegated prefix blocked with it"`
	Iface string `json:"iface"`
}

// BlockRef names one block.
type BlockRef struct {
	ID string `json:"id" api:"required"`
}

// BlockAnswer answers a change of one block.
type BlockAnswer struct {
	Result
	Block *Block `json:"block,omitempty"`
}

// BlockPageRequest pages the blocks in id order.
type BlockPageRequest struct {
	After string `json:"after"`
	Limit int    `json:"limit" api:"min=1,max=10000,default=5000"`
}

// BlockPage is one page of blocks.
type BlockPage struct {
	Count  int     `json:"count"`
	Blocks []Block `json:"blocks"`
	Next   string  `json:"next,omitempty"`
}

// AuthFailure is one failed authentication at the gateway: the caller's
// address and when; never the key it sent.
type AuthFailure struct {
	Addr string `json:"addr" api:"required,format=ip"`
	Port int    `json:"port" doc:"the port it came to (the API's or the OLT monitor's)"`
	Time string `json:"time" doc:"RFC 3339"`
}

// Firewall events.
const (
	BlockSet     = "block.set"
	BlockRemoved = "block.removed"
)

var (
	// FirewallBlock blocks one subscriber (one set element).
	FirewallBlock = Define[Block, BlockAnswer](Meta{
		Service: "firewall", Name: "blocks.set",
		Summary: "Block one subscriber's forwarding (201 new, 200 changed). Only services call it.", Status: 201,
	})
	// FirewallUnblock removes one subscriber's block; 404 when none.
	FirewallUnblock = Define[BlockRef, BlockAnswer](Meta{
		Service: "firewall", Name: "blocks.remove",
		Summary: "Unblock one subscriber; 404 when not blocked. Only services call it.",
	})
	// FirewallBlocks pages the blocks (reconciliation by the owner of the
	// subscribers).
	FirewallBlocks = Define[BlockPageRequest, BlockPage](Meta{
		Service: "firewall", Name: "blocks.page",
		Summary: "Blocked subscribers in id order, a page at a time. Only services call it.", Read: true,
	})
	// FirewallAuthFailed feeds the ban engine with one gateway
	// authentication failure.
	FirewallAuthFailed = Define[AuthFailure, None](Meta{
		Service: "firewall", Name: "authfail",
		Summary: "One failed authentication at the gateway, for the ban engine. Only the gateway calls it.",
	})
)

// Protection (Document 1, "Protection"): the allow-list of the API and OLT
// monitor ports, the ban service, the firewall views.

// ProtectEntry is one allow-list entry.
type ProtectEntry struct {
	Network string `json:"network" example:"192.0.2.0/24"`
	Comment string `json:"comment"`
	Added   string `json:"added" example:"2026-11-24 10:00:00"`
}

// ProtectList answers GET /protect.
type ProtectList struct {
	Port     int            `json:"port" doc:"the API port"`
	Count    int            `json:"count"`
	Networks []ProtectEntry `json:"networks"`
	Status   string         `json:"status" doc:"protected, or 'open (no restrictions)' while the list is empty"`
}

// ProtectAdd adds one network to the allow-list.
type ProtectAdd struct {
	Network string `json:"network" api:"required" doc:"IPv4 address or address/0..32; a bare address is stored as /32"`
	Comment string `json:"comment" api:"maxlen=200"`
}

// ProtectRef names one allow-list entry.
type ProtectRef struct {
	Network string `json:"network" api:"required" doc:"as added; a bare address is /32"`
}

// ProtectCheckedRef is POST /network/protect-delete: the entry and the
// caller's address for the lock-out check.
type ProtectCheckedRef struct {
	Network string `json:"network" api:"required"`
	Client  string `json:"client" api:"format=ip" doc:"the caller's address for the lock-out check; the request's own caller when empty"`
}

// ProtectAnswer answers a change of the allow-list.
type ProtectAnswer struct {
	Result
	Networks []ProtectEntry `json:"networks"`
}

// Jail is one jail of the ban service.
type Jail struct {
	Jail            string   `json:"jail"`
	CurrentlyBanned int      `json:"currently_banned"`
	TotalBanned     int      `json:"total_banned"`
	BannedIPs       []string `json:"banned_ips"`
}

// Fail2banStatus answers GET /fail2ban.
type Fail2banStatus struct {
	Running bool   `json:"running"`
	Jails   []Jail `json:"jails"`
}

// Fail2banUnban lifts one ban.
type Fail2banUnban struct {
	Unban string `json:"unban" api:"required,format=ip,alias=ip" doc:"IPv4 or IPv6 address"`
}

// Fail2banAnswer answers an unban.
type Fail2banAnswer struct {
	Result
	Detail string `json:"detail"`
}

// FirewallViewRequest filters GET /firewall.
type FirewallViewRequest struct {
	Network string `json:"network" doc:"IPv4 CIDR: only clients in it (rules without a known client are then left out)"`
}

// MACRuleClient is the registered client of a MAC rule.
type MACRuleClient struct {
	IP       string `json:"ip"`
	Hostname string `json:"hostname"`
	Comment  string `json:"comment"`
}

// MACRule is one firewall MAC rule: a MAC bound to its addresses on an
// interface (the anti-spoofing bindings).
type MACRule struct {
	MAC    string         `json:"mac"`
	Iface  string         `json:"iface"`
	Client *MACRuleClient `json:"client"`
}

// FirewallView answers GET /firewall.
type FirewallView struct {
	Count    int       `json:"count"`
	MACRules []MACRule `json:"mac_rules"`
}

// FirewallFull answers GET /firewall/full.
type FirewallFull struct {
	ForwardChain []string `json:"forward_chain" doc:"the kernel's verbose listing of the forward path, one line per string"`
}

// Protection events.
const (
	ProtectAdded   = "protect.added"
	ProtectDeleted = "protect.deleted"
	BanAdded       = "ban.added"
	BanRemoved     = "ban.removed"
)

var (
	// ProtectGet lists the allow-list.
	ProtectGet = Define[None, ProtectList](Meta{
		Service: "firewall", Name: "protect.list",
		Summary: "The allow-list of the API and OLT monitor ports.",
		REST:    []REST{{"GET", "/protect"}}, Action: "protect-list", Read: true,
	})
	// ProtectAddOp adds a network: 400 invalid, 409 already allowed.
	ProtectAddOp = Define[ProtectAdd, ProtectAnswer](Meta{
		Service: "firewall", Name: "protect.add",
		Summary: "Allow a network on the API and OLT monitor ports (new connections from others are dropped once the list has an entry); 400 invalid, 409 already allowed.",
		REST:    []REST{{"POST", "/protect"}, {"GET", "/protect/add"}, {"POST", "/network/protect-add"}}, Action: "protect-add",
		Status: 201, Event: ProtectAdded,
	})
	// ProtectDeleteOp removes a network; 404 when not listed.
	ProtectDeleteOp = Define[ProtectRef, ProtectAnswer](Meta{
		Service: "firewall", Name: "protect.delete",
		Summary: "Remove a network from the allow-list; 404 when not on it.",
		REST:    []REST{{"DELETE", "/protect"}, {"GET", "/protect/delete"}}, Action: "protect-delete", Event: ProtectDeleted,
	})
	// ProtectDeleteChecked is POST /network/protect-delete: as DELETE
	// /protect, refused (409) for 127.0.0.1 and when the caller is
	// allowed only through this entry.
	ProtectDeleteChecked = Define[ProtectCheckedRef, ProtectAnswer](Meta{
		Service: "firewall", Name: "protect.delete-checked",
		Summary: "As DELETE /protect with the lock-out check: 409 for 127.0.0.1 (always allowed) or when the caller (client, else the request's caller) is allowed only through this entry; 404 no such entry.",
		REST:    []REST{{"POST", "/network/protect-delete"}}, Event: ProtectDeleted,
	})
	// Fail2banGet is the ban service's state.
	Fail2banGet = Define[None, Fail2banStatus](Meta{
		Service: "firewall", Name: "fail2ban.status",
		Summary: "The ban service: running and its jails ({running:false, jails:[]} when off).",
		REST:    []REST{{"GET", "/fail2ban"}}, Action: "fail2ban-status", Read: true,
	})
	// Fail2banShow is the action fail2ban, as fail2ban-status.
	Fail2banShow = Define[None, Fail2banStatus](Meta{
		Service: "firewall", Name: "fail2ban.show",
		Summary: "As GET /fail2ban.", Action: "fail2ban", Read: true,
	})
	// Fail2banUnbanOp lifts a ban: 400 invalid IP, 500 with detail when
	// it failed.
	Fail2banUnbanOp = Define[Fail2banUnban, Fail2banAnswer](Meta{
		Service: "firewall", Name: "fail2ban.unban",
		Summary: "Lift the ban of an address (unban, or ip in the action form); 400 invalid IP; 500 with detail when it failed. An address not banned is a 200 saying so.",
		REST:    []REST{{"POST", "/fail2ban"}, {"POST", "/network/f2b-unban"}}, Action: "fail2ban-unban", Event: BanRemoved,
	})
	// FirewallGet lists the MAC rules.
	FirewallGet = Define[FirewallViewRequest, FirewallView](Meta{
		Service: "firewall", Name: "firewall.rules",
		Summary: "Firewall MAC rules (the anti-spoofing bindings), each with its registered client or null.",
		REST:    []REST{{"GET", "/firewall"}}, Action: "firewall", Read: true,
	})
	// FirewallFullGet is the kernel's listing of the forward path.
	FirewallFullGet = Define[None, FirewallFull](Meta{
		Service: "firewall", Name: "firewall.full",
		Summary: "The kernel's verbose listing of every forward-hook chain (nft -a), one line per string.",
		REST:    []REST{{"GET", "/firewall/full"}}, Action: "firewall-full", Read: true,
	})
)

// Anti-spoofing (Document 2, "Anti-spoofing", "Anti-spoofing mode per
// VLAN").

// AntispoofDropped are an interface's drop counters, read from the kernel.
type AntispoofDropped struct {
	IP4 uint64 `json:"ip4"`
	IP6 uint64 `json:"ip6"`
	ARP uint64 `json:"arp"`
}

// AntispoofIface is one enforced interface.
type AntispoofIface struct {
	Mode      string           `json:"mode" doc:"strict or dynamic"`
	Exists    bool             `json:"exists" doc:"the interface exists (an enforced interface that does not has no rules yet)"`
	Bindings4 int              `json:"bindings4"`
	Bindings6 int              `json:"bindings6"`
	Dropped   AntispoofDropped `json:"dropped"`
	Clients   int              `json:"clients" doc:"registered clients bound on it"`
	Service   int              `json:"service" doc:"fibre services bound on it"`
	Leases    int              `json:"leases" doc:"leases of unregistered devices bound on it (dynamic)"`
}

// AntispoofLive describes the kernel's rules.
type AntispoofLive struct {
	V4Chain   string `json:"v4_chain"`
	V4Rules   int    `json:"v4_rules"`
	V4Forward bool   `json:"v4_forward"`
	V4Input   bool   `json:"v4_input"`
	V6Chain   string `json:"v6_chain"`
	V6Rules   int    `json:"v6_rules"`
	V6Forward bool   `json:"v6_forward"`
	V6Input   bool   `json:"v6_input"`
}

// AntispoofLastHour counts the last hour's logged attempts.
type AntispoofLastHour struct {
	Attempts int `json:"attempts"`
	Devices  int `json:"devices"`
}

// AntispoofStatus answers GET /antispoof.
type AntispoofStatus struct {
	Enabled     bool                      `json:"enabled"`
	Mode        string                    `json:"mode"`
	Log         bool                      `json:"log"`
	Exempt      []string                  `json:"exempt"`
	Overrides   map[string]string         `json:"overrides"`
	Served      []string                  `json:"served"`
	Enforced    map[string]AntispoofIface `json:"enforced"`
	SwitchedOff []string                  `json:"switched_off"`
	Live        AntispoofLive             `json:"live"`
	LastHour    AntispoofLastHour         `json:"last_hour"`
	LogPrefixes []string                  `json:"log_prefixes"`
}

// AntispoofSet is POST /antispoof: at least one field.
type AntispoofSet struct {
	Enabled *bool     `json:"enabled"`
	Mode    *string   `json:"mode" api:"enum=strict|dynamic"`
	Log     *bool     `json:"log"`
	Exempt  *[]string `json:"exempt" doc:"networks allowed from any MAC on every enforced VLAN, string or array; [] clears"`
}

// AntispoofApply says what a change did to the kernel.
type AntispoofApply struct {
	Applied   bool     `json:"applied"`
	Enabled   bool     `json:"enabled"`
	Bindings4 int      `json:"bindings4"`
	Bindings6 int      `json:"bindings6"`
	Action    string   `json:"action,omitempty"`
	Errors    []string `json:"errors,omitempty"`
}

// AntispoofSetAnswer answers POST /antispoof.
type AntispoofSetAnswer struct {
	Result
	Apply  AntispoofApply  `json:"apply"`
	Status AntispoofStatus `json:"status"`
}

// AntispoofIfaceSet is POST /antispoof/{iface}.
type AntispoofIfaceSet struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name (up to 15 characters)"`
	Mode  string `json:"mode" api:"required,enum=strict|dynamic|off|default"`
}

// AntispoofIfaceRef is DELETE /antispoof/{iface}.
type AntispoofIfaceRef struct {
	Iface string `json:"iface" api:"required" pattern:"^[A-Za-z0-9_.@:-]{1,15}$" hint:"an interface name (up to 15 characters)"`
}

// AntispoofIfaceAnswer answers a per-interface mode change.
type AntispoofIfaceAnswer struct {
	Result
	Iface     string         `json:"iface"`
	Requested string         `json:"requested"`
	Effective string         `json:"effective"`
	Note      string         `json:"note,omitempty"`
	Apply     AntispoofApply `json:"apply"`
}

// AntispoofLogRequest is GET /antispoof/log.
type AntispoofLogRequest struct {
	Since string `json:"since" doc:"30m, 2h, 1d, 45s, or YYYY-MM-DD HH:MM; default one hour"`
	Limit int    `json:"limit" api:"min=1,max=500,default=50"`
}

// AntispoofLogEntry is one logged drop.
type AntispoofLogEntry struct {
	Time  string `json:"time"`
	Kind  string `json:"kind" doc:"ip or arp"`
	Iface string `json:"iface"`
	MAC   string `json:"mac"`
	Src   string `json:"src"`
	Dst   string `json:"dst"`
	Proto string `json:"proto,omitempty" doc:"IP entries: TCP, UDP, ICMP, ICMPv6/RA..."`
	Dport int    `json:"dport,omitempty"`
	Op    string `json:"op,omitempty" doc:"ARP entries: request or reply"`
}

// AntispoofOffender groups the drops of one VLAN, MAC and source.
type AntispoofOffender struct {
	Iface string `json:"iface"`
	MAC   string `json:"mac"`
	Src   string `json:"src"`
	Count int    `json:"count"`
	Last  string `json:"last"`
	IP    int    `json:"ip"`
	ARP   int    `json:"arp"`
}

// AntispoofLog answers GET /antispoof/log.
type AntispoofLog struct {
	Result
	Enabled   bool                `json:"enabled"`
	Since     string              `json:"since"`
	Total     int                 `json:"total"`
	Offenders []AntispoofOffender `json:"offenders"`
	Entries   []AntispoofLogEntry `json:"entries"`
}

// AntispoofSyncAnswer answers POST /antispoof/sync.
type AntispoofSyncAnswer struct {
	Result
	Applied bool `json:"applied"`
	Enabled bool `json:"enabled"`
}

// AntispoofMode is the global mode for /status.
type AntispoofMode struct {
	Mode string `json:"mode" doc:"strict or dynamic when enabled, otherwise off"`
}

// Anti-spoofing events.
const (
	AntispoofChanged = "antispoof.changed"
	SpoofDetected    = "spoof.detected"
)

var (
	// AntispoofGet is the anti-spoofing answer.
	AntispoofGet = Define[None, AntispoofStatus](Meta{
		Service: "firewall", Name: "antispoof.status",
		Summary: "Anti-spoofing: settings, enforced interfaces with bindings and kernel drop counters, live rules, the last hour.",
		REST:    []REST{{"GET", "/antispoof"}}, Action: "antispoof-status", Read: true,
	})
	// AntispoofSetOp changes the settings.
	AntispoofSetOp = Define[AntispoofSet, AntispoofSetAnswer](Meta{
		Service: "firewall", Name: "antispoof.set",
		Summary: "Change enabled, mode, log, exempt (at least one). Disabling removes every rule and keeps the settings. 400 nothing to set or invalid; 500 rules not applied.",
		REST:    []REST{{"POST", "/antispoof"}, {"POST", "/network/antispoof-set"}}, Action: "antispoof-set", Event: AntispoofChanged,
	})
	// AntispoofIfaceOp sets one interface's mode.
	AntispoofIfaceOp = Define[AntispoofIfaceSet, AntispoofIfaceAnswer](Meta{
		Service: "firewall", Name: "antispoof.iface",
		Summary: "One interface's mode: strict, dynamic, off, default (follow the global mode). 404 when the interface neither exists nor is served.",
		REST:    []REST{{"POST", "/antispoof/{iface}"}, {"POST", "/network/antispoof-iface"}}, Action: "antispoof-iface", Event: AntispoofChanged,
	})
	// AntispoofIfaceDelete is mode default.
	AntispoofIfaceDelete = Define[AntispoofIfaceRef, AntispoofIfaceAnswer](Meta{
		Service: "firewall", Name: "antispoof.iface-delete",
		Summary: "As mode default: the interface follows the global mode.",
		REST:    []REST{{"DELETE", "/antispoof/{iface}"}}, Event: AntispoofChanged,
	})
	// AntispoofLogGet reads the drop log.
	AntispoofLogGet = Define[AntispoofLogRequest, AntispoofLog](Meta{
		Service: "firewall", Name: "antispoof.log",
		Summary: "Logged drops since (default one hour), newest first, and offenders grouped by VLAN+MAC+source, most drops first.",
		REST:    []REST{{"GET", "/antispoof/log"}}, Action: "antispoof-log", Read: true,
	})
	// AntispoofSyncOp rebuilds the rules.
	AntispoofSyncOp = Define[None, AntispoofSyncAnswer](Meta{
		Service: "firewall", Name: "antispoof.sync",
		Summary: "Rebuild the anti-spoofing rules from the clients and leases now (normally unneeded: changes follow by themselves).",
		REST:    []REST{{"POST", "/antispoof/sync"}, {"POST", "/network/antispoof-sync"}}, Action: "antispoof-sync",
	})
	// AntispoofModeGet is the global mode, for /status.
	AntispoofModeGet = Define[None, AntispoofMode](Meta{
		Service: "firewall", Name: "antispoof.mode",
		Summary: "The global anti-spoofing mode or off (for /status). Only services call it.", Read: true,
	})
)

// FirewallConfig is the firewall service's configuration document,
// etc/firewall.json: the allow-list and the anti-spoofing settings
// (suspension blocks follow the clients and bans are state: neither is
// configuration). Its place in ConfigOwners (the restore order) belongs in
// system.go.
var FirewallConfig = configOwner("firewall", "etc/firewall.json")
