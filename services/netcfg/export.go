package netcfg

import (
	"context"
	"encoding/json"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/netcfg/route"
	"routerd.dev/shared/apierr"
)

// RoutesDocument is the path of the static routes' configuration document.
const RoutesDocument = "etc/routes.json"

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
	return &api.ConfigDocuments{Documents: map[string]string{RoutesDocument: string(out) + "\n"}}, nil
}

// importConfig replaces the managed routes with those of etc/routes.json
// and reconciles the kernel (netcfg.config.import); without that document
// nothing changes. A document that does not parse, or a route that is
// invalid, is a 400 and nothing changes. Routes the kernel refuses are
// reported in the answer's message.
func (s *Service) importConfig(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	text, ok := in.Documents[RoutesDocument]
	if !ok {
		return &api.ConfigImported{Documents: []string{}}, nil
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
	a := &api.ConfigImported{Documents: []string{RoutesDocument}}
	if len(res.Problems) > 0 {
		a.Message = "not applied to the kernel: " + strings.Join(res.Problems, "; ")
	}
	return a, nil
}
