// Package fibre keeps the fibre services of the subscribers service: a
// subscriber on an ONT of a registered OLT, numbered from its PON port.
// So far it serves the billing flow's first step, the ONTs the OLTs see
// but have not registered, with the numbering a service for each would
// take.
package fibre

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
)

// PortCVLAN is the C-VLAN of the subscribers of a PON port (frame/slot/
// port) inside the router's S-VLAN: 100 + slot x 16 + port, so 0/1/0 is
// 116. Numbering is derived, never chosen: a port's subscribers share it.
func PortCVLAN(pon string) (int, error) {
	parts := strings.Split(pon, "/")
	if len(parts) != 3 {
		return 0, fmt.Errorf("PON port %q: want frame/slot/port", pon)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("PON port %q: want frame/slot/port", pon)
		}
		n[i] = v
	}
	slot, port := n[1], n[2]
	if port > 15 {
		return 0, fmt.Errorf("PON port %q: port %d past the 16 a card numbers", pon, port)
	}
	v := 100 + slot*16 + port
	if v > 4094 {
		return 0, fmt.Errorf("PON port %q: C-VLAN %d past 4094", pon, v)
	}
	return v, nil
}

// AskTimeout bounds one OLT's autofind: the OLT operations' default.
const AskTimeout = 40 * time.Second

// Unregistered asks every registered OLT (or only in.OLT) in turn for its
// autofind table and lists the ONTs with the VLANs a service for each
// would use. An OLT that cannot be asked (unreachable, refusing the
// login, past AskTimeout) is named in Errors and the others are still
// listed: one dead OLT must not hide the rest from the billing system.
func Unregistered(ctx context.Context, nc *nats.Conn, in *api.UnregisteredRequest) (*api.UnregisteredAnswer, error) {
	list, err := bus.Invoke(ctx, nc, api.OLTsList, &api.None{})
	if err != nil {
		return nil, err
	}
	olts := list.OLTs
	if in.OLT != "" {
		olts = nil
		for _, o := range list.OLTs {
			if o.Name == in.OLT {
				olts = append(olts, o)
			}
		}
		if len(olts) == 0 {
			return nil, apierr.NotFound("Unknown OLT: %s", in.OLT)
		}
	}
	sort.Slice(olts, func(i, j int) bool { return olts[i].Name < olts[j].Name })
	out := &api.UnregisteredAnswer{OK: true, Code: 200, ONTs: []api.UnregisteredONT{}, Errors: map[string]string{},
		Next: "register one with POST /olt/ont-add (olt, port = its pon, sn); POST /services, which also provisions the router's side, is not built yet"}
	for _, o := range olts {
		if ctx.Err() != nil {
			out.Errors[o.Name] = "not asked: the request's time ran out"
			continue
		}
		onts, err := autofind(ctx, nc, o)
		if err != nil {
			out.Errors[o.Name] = err.Error()
			continue
		}
		out.ONTs = append(out.ONTs, onts...)
	}
	out.Count = len(out.ONTs)
	return out, nil
}

// autofindONT is one entry of the olt service's autofind result (the
// driver's AutofindONT).
type autofindONT struct {
	Port            string `json:"port"`
	SN              string `json:"sn"`
	Vendor          string `json:"vendor"`
	SoftwareVersion string `json:"software_version"`
	EquipmentID     string `json:"equipment_id"`
	Seen            string `json:"seen"`
}

// autofind reads one OLT's autofind table.
func autofind(ctx context.Context, nc *nats.Conn, o api.OLTRecord) ([]api.UnregisteredONT, error) {
	actx, cancel := context.WithTimeout(ctx, AskTimeout+5*time.Second)
	defer cancel()
	// A typed request carries every field: the timeout is spelled out (0
	// would be refused).
	ans, err := bus.Invoke(actx, nc, api.OLTAutofind, &api.OLTOpRequest{OLTOptions: api.OLTOptions{OLT: o.Name, Timeout: int(AskTimeout / time.Second)}})
	if err != nil {
		return nil, err
	}
	if !ans.OK || ans.Result == nil {
		why := fmt.Sprintf("the OLT answered %d", ans.Code)
		if ans.Error != nil {
			why = *ans.Error
		}
		return nil, fmt.Errorf("%s", why)
	}
	raw, err := json.Marshal(ans.Result)
	if err != nil {
		return nil, err
	}
	var res struct {
		ONTs []autofindONT `json:"onts"`
	}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("autofind unreadable: %w", err)
	}
	var svlan *int
	if o.SVLAN > 0 {
		v := o.SVLAN
		svlan = &v
	}
	out := make([]api.UnregisteredONT, 0, len(res.ONTs))
	for _, a := range res.ONTs {
		cv, err := PortCVLAN(a.Port)
		if err != nil {
			return nil, err
		}
		out = append(out, api.UnregisteredONT{OLT: o.Name, PON: a.Port, SN: a.SN, Vendor: a.Vendor, Model: a.EquipmentID,
			Software: a.SoftwareVersion, SeenAt: a.Seen, SVLAN: svlan, CVLAN: cv})
	}
	return out, nil
}
