package api

import "time"

// Fibre services (Document 2, Services): one subscriber on the fibre
// network, an ONT on a PON port of a registered OLT. So far only the
// first step of the billing flow is served: the ONTs waiting on the OLTs.

// UnregisteredRequest is GET /services/unregistered.
type UnregisteredRequest struct {
	OLT string `json:"olt" pattern:"^[A-Za-z0-9_-]{1,40}$" hint:"a registered OLT's name" doc:"ask this registered OLT only (404 when unknown); default every registered OLT, in name order"`
}

// UnregisteredONT is an ONT an OLT sees on a PON port but has not
// registered: what a service for it would be created with.
type UnregisteredONT struct {
	OLT      string `json:"olt"`
	PON      string `json:"pon" doc:"frame/slot/port"`
	SN       string `json:"sn" doc:"serial, 16 hex digits"`
	Vendor   string `json:"vendor"`
	Model    string `json:"model" doc:"the ONT's equipment id"`
	Software string `json:"software"`
	SeenAt   string `json:"seen_at" doc:"when the OLT first saw it, as the OLT says"`
	SVLAN    *int   `json:"svlan" doc:"the OLT's S-VLAN for this router (its registry record); null when none is set"`
	CVLAN    int    `json:"cvlan" doc:"the PON port's C-VLAN: 100 + slot x 16 + port (0/1/0 gives 116)"`
}

// UnregisteredAnswer answers GET /services/unregistered.
type UnregisteredAnswer struct {
	OK     bool              `json:"ok"`
	Code   int               `json:"code"`
	Count  int               `json:"count"`
	ONTs   []UnregisteredONT `json:"onts"`
	Errors map[string]string `json:"errors" doc:"OLTs that could not be asked, with why; their ONTs are missing from onts"`
	Next   string            `json:"next" doc:"what to do with one of them"`
}

var (
	// ServicesUnregistered is GET /services/unregistered.
	ServicesUnregistered = Define[UnregisteredRequest, UnregisteredAnswer](Meta{
		Service: "subscribers", Name: "services.unregistered",
		Summary: "ONTs the registered OLTs see on their PON ports but have not registered (each OLT's autofind, asked in turn, each within 40 s), with the S-VLAN and the port's C-VLAN a service for each would use. An OLT that cannot be asked is named in `errors`, the others are still listed; 404 for an unknown `olt`.",
		REST:    []REST{{"GET", "/services/unregistered"}}, Action: "service-unregistered", Read: true,
		Timeout: 3 * time.Minute,
	})
)
