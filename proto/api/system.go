package api

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
