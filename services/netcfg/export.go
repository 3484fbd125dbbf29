package netcfg

import (
	"context"
	"encoding/json"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/netcfg/route"
	"routerd.dev/services/netcfg/vlan"
	"routerd.dev/shared/apierr"
)

// RoutesDocument is the path of the static routes' configuration document.
const RoutesDocument = "etc/routes.json"

// VLANsDocument is the path of the VLANs' and port addresses' document.
const VLANsDocument = "etc/vlans.json"

// routesDoc is etc/routes.json: the managed routes in creation order.
type routesDoc struct {
	Routes []route.Route `json:"routes"`
}

// exportConfig renders the managed routes as etc/routes.json
// (netcfg.config.export).
func (s *Service) exportConfig(ctx context.Context, _ *api.None) (*api.ConfigDocuments, error) {
	managed, err := s.routes.Managed(ctx)
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(routesDoc{Routes: append([]route.Route{}, managed...)}, "", "    ")
	if err != nil {
		return nil, err
	}
	vd, err := s.vlans.Export(ctx)
	if err != nil {
		return nil, err
	}
	vout, err := json.MarshalIndent(vd, "", "    ")
	if err != nil {
		return nil, err
	}
	return &api.ConfigDocuments{Documents: map[string]string{RoutesDocument: string(out) + "\n", VLANsDocument: string(vout) + "\n"}}, nil
}

// importConfig replaces the managed routes with those of etc/routes.json
// and reconciles the kernel (netcfg.config.import); without that document
// nothing changes. A document that does not parse, or a route that is
// invalid, is a 400 and nothing changes. Routes the kernel refuses are
// reported in the answer's message.
func (s *Service) importConfig(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	// VLANs first: routes may go out through them.
	var done []string
	var problems []string
	if text, ok := in.Documents[VLANsDocument]; ok {
		var vd vlan.Document
		dec := json.NewDecoder(strings.NewReader(text))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&vd); err != nil {
			return nil, apierr.Invalid("documents", "%s does not parse: %v", VLANsDocument, err).With("broken_data_files", []string{VLANsDocument})
		}
		p, err := s.vlans.Replace(ctx, vd)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
		done = append(done, VLANsDocument)
	}
	text, ok := in.Documents[RoutesDocument]
	if !ok {
		a := &api.ConfigImported{Documents: append([]string{}, done...)}
		if len(problems) > 0 {
			a.Message = "not applied to the kernel: " + strings.Join(problems, "; ")
		}
		return a, nil
	}
	var doc routesDoc
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, apierr.Invalid("documents", "%s does not parse: %v", RoutesDocument, err).With("broken_data_files", []string{RoutesDocument})
	}
	res, err := s.routes.Replace(ctx, doc.Routes)
	if err != nil {
		if ae := apierr.From(err); ae.Kind != apierr.KindInternal {
			return nil, apierr.New(ae.Kind, "%s: %s", RoutesDocument, err.Error()).With("field", "documents")
		}
		return nil, err
	}
	a := &api.ConfigImported{Documents: append(done, RoutesDocument)}
	if problems = append(problems, res.Problems...); len(problems) > 0 {
		a.Message = "not applied to the kernel: " + strings.Join(problems, "; ")
	}
	return a, nil
}
