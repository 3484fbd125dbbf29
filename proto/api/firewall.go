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
