package netcfg

import (
	"context"
	"encoding/json"
	"strings"

	"routerd.dev/proto/api"
	"routerd.dev/services/netcfg/network"
	"routerd.dev/services/netcfg/route"
	"routerd.dev/services/netcfg/vlan"
	"routerd.dev/shared/apierr"
)

// RoutesDocument is the path of the static routes' configuration document.
const RoutesDocument = "etc/routes.json"

// VLANsDocument is the path of the VLANs' and port addresses' document.
const VLANsDocument = "etc/vlans.json"

// NetworkDocument is the path of the network document (ports and bonds).
const NetworkDocument = "etc/network.json"

// networkDoc is etc/network.json: the network document, and whether one
// is stored at all.
type networkDoc struct {
	Managed bool `json:"managed"`
	api.NetConfig
}

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
	cur, _, isManaged, err := s.loadDoc(ctx)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{RoutesDocument: string(out) + "\n", VLANsDocument: string(vout) + "\n"}
	// The network document exists once the network is managed (POST
	// /network/adopt); before that there is nothing to save or restore.
	if isManaged {
		nout, err := json.MarshalIndent(networkDoc{Managed: true, NetConfig: cur}, "", "    ")
		if err != nil {
			return nil, err
		}
		docs[NetworkDocument] = string(nout) + "\n"
	}
	return &api.ConfigDocuments{Documents: docs}, nil
}

// importConfig replaces the managed routes with those of etc/routes.json
// and reconciles the kernel (netcfg.config.import); without that document
// nothing changes. A document that does not parse, or a route that is
// invalid, is a 400 and nothing changes. Routes the kernel refuses are
// reported in the answer's message.
func (s *Service) importConfig(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	// The network document first (VLANs sit on its ports and bonds),
	// then VLANs (routes may go out through them).
	var done []string
	var problems []string
	if text, ok := in.Documents[NetworkDocument]; ok {
		p, err := s.importNetwork(ctx, text)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
		done = append(done, NetworkDocument)
	}
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

// importNetwork replaces the stored network document with etc/network.json
// and applies it to the kernel and the rendered files at once (a restore
// is not timed). Refused (409) while an apply waits for confirm.
func (s *Service) importNetwork(ctx context.Context, text string) ([]string, error) {
	var nd networkDoc
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nd); err != nil {
		return nil, apierr.Invalid("documents", "%s does not parse: %v", NetworkDocument, err).With("broken_data_files", []string{NetworkDocument})
	}
	n := &s.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fst == nil {
		return nil, apierr.Unavailable("netcfg is not serving (no host lock); try again")
	}
	if p, _, err := s.loadPending(ctx); err != nil {
		return nil, err
	} else if p != nil {
		return nil, apierr.Conflict("%s: a network apply is waiting for confirm; confirm or roll it back first", NetworkDocument)
	}
	c := network.Normal(nd.NetConfig)
	for _, b := range c.Bonds {
		if b.Name == "" || len(b.Members) == 0 || !contains(network.Modes, b.Mode) {
			return nil, apierr.Invalid("documents", "%s: bond %q needs a name, members and a mode", NetworkDocument, b.Name)
		}
	}
	txn := n.fst.Txn()
	if nd.Managed {
		txn = txn.Put(s.docKey(), c)
	} else {
		txn = txn.Delete(s.docKey())
	}
	if _, err := txn.Commit(ctx); err != nil {
		return nil, storeErr(err)
	}
	if !nd.Managed {
		return nil, nil
	}
	var problems []string
	if _, err := network.Apply(s.nl, c); err != nil {
		problems = append(problems, "network: "+err.Error())
	}
	if err := network.WriteDir(s.deps.NetworkDir, s.render(ctx, c, network.Version(c))); err != nil {
		problems = append(problems, "network files: "+err.Error())
	}
	return problems, nil
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
