package api

// MAC clients (Document 2, "Client (legacy, MAC-based)"): the record and
// the operations other services call to follow them. The subscribers
// service owns clients; the firewall (suspension blocks, anti-spoofing
// bindings), the shaper and cgnat (slots) follow them through the client.*
// events and page through ClientsPage at start.

// Client is a MAC client as stored and answered.
type Client struct {
	MAC           string  `json:"mac" example:"AA:BB:CC:DD:EE:FF"`
	IP            string  `json:"ip" example:"10.0.0.50"`
	IPv6          *string `json:"ipv6"`
	Plan          *string `json:"plan"`
	Suspended     bool    `json:"suspended"`
	AutoSuspended bool    `json:"auto_suspended" doc:"set by end-date reconciliation; a manual suspend clears it"`
	Expires       *string `json:"expires" doc:"end date, YYYY-MM-DD, or null for never"`
	Hostname      string  `json:"hostname"`
	Network       *string `json:"network"`
	Network6      *string `json:"network6"`
	Iface         string  `json:"iface"`
	Gateway       string  `json:"gateway"`
	Comment       string  `json:"comment"`
	Created       string  `json:"created" example:"2026-11-24 10:00:00"`
}

// ClientPageRequest pages every client in MAC order.
type ClientPageRequest struct {
	After string `json:"after" doc:"the previous page's next"`
	Limit int    `json:"limit" api:"min=1,max=10000,default=5000"`
	Iface string `json:"iface" doc:"only clients on this interface"`
}

// ClientPage is one page of clients.
type ClientPage struct {
	Count   int      `json:"count"`
	Clients []Client `json:"clients"`
	Next    string   `json:"next,omitempty" doc:"empty on the last page"`
}

// Client events: the data is the Client after the change (before it, for
// deleted).
const (
	ClientAdded     = "client.added"
	ClientChanged   = "client.changed"
	ClientDeleted   = "client.deleted"
	ClientSuspended = "client.suspended"
	ClientResumed   = "client.resumed"
	ClientReshaped  = "client.reshaped"
)

// ClientsPage gives other services every client, page by page (firewall
// bindings, cgnat slots, the refusals of netcfg).
var ClientsPage = Define[ClientPageRequest, ClientPage](Meta{
	Service: "subscribers", Name: "clients.page",
	Summary: "Clients in MAC order, a page at a time, optionally of one interface. Only services call it.", Read: true,
})
