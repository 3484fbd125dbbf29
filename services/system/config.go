package system

import (
	"context"
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
	"sync"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/system/confdoc"
	"routerd.dev/services/system/versions"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/docobj"
)

// exportTimeout bounds the question to each owner for its documents (an
// owner renders 100,000 clients in a few seconds).
const exportTimeout = 45 * time.Second

// docSet is a configuration as its owners gave it: documents as text,
// and those that grow with the subscribers (etc/clients.json,
// etc/dhcp-reservations.json past docobj.InlineMax) as objects of the
// bus's document store, read as streams and never held whole.
type docSet struct {
	text confdoc.Docs
	objs map[string]api.ConfigObject
}

// paths are the set's paths, sorted.
func (d docSet) paths() []string {
	out := confdoc.Paths(d.text)
	for p := range d.objs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// sources are the set's documents as streams, in path order.
func (s *Service) sources(ctx context.Context, d docSet) []confdoc.Source {
	out := confdoc.TextSources(d.text)
	for p, o := range d.objs {
		out = append(out, confdoc.Source{Path: p, Bytes: o.Bytes, Open: func() (io.ReadCloser, error) {
			return docobj.Open(ctx, s.deps.NC, o)
		}})
	}
	confdoc.SortSources(out)
	return out
}

// release deletes the set's objects (they expire otherwise).
func (s *Service) release(ctx context.Context, d docSet) {
	docobj.Delete(context.WithoutCancel(ctx), s.deps.NC, d.objs)
}

// running gathers the running configuration whole: for what compares
// texts (config-status, config-diff).
func (s *Service) running(ctx context.Context) (confdoc.Docs, error) {
	set, err := s.collect(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release(ctx, set)
	docs := maps.Clone(set.text)
	for p, o := range set.objs {
		if docs[p], err = docobj.Text(ctx, s.deps.NC, o); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// collect gathers the running configuration: every owner's documents,
// asked concurrently. An owner that does not answer makes it a 503 naming
// the service (a configuration with an area missing is not the running
// one); stored records that do not parse, in any owner, a 500 listing them
// all in broken_data_files. The caller releases the set.
func (s *Service) collect(ctx context.Context) (docSet, error) {
	type answer struct {
		owner api.ConfigOwner
		docs  *api.ConfigDocuments
		err   error
	}
	answers := make([]answer, len(s.owners))
	var wg sync.WaitGroup
	for i, o := range s.owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actx, cancel := context.WithTimeout(ctx, exportTimeout)
			defer cancel()
			d, err := bus.Invoke(actx, s.deps.NC, o.Export, &api.None{})
			answers[i] = answer{o, d, err}
		}()
	}
	wg.Wait()
	set := docSet{text: confdoc.Docs{}, objs: map[string]api.ConfigObject{}}
	var broken []string
	var first error
	for _, a := range answers {
		if a.err != nil {
			ae := apierr.From(a.err)
			if b, ok := ae.Fields["broken_data_files"]; ok {
				broken = append(broken, toStrings(b)...)
				continue
			}
			if first == nil {
				if ae.Kind == apierr.KindUnavailable {
					first = apierr.Unavailable("the %s service did not give its configuration documents: %s", a.owner.Service, ae.Message).With("service", a.owner.Service)
				} else {
					first = apierr.Internal(ae.Message, "the %s service could not render its configuration documents", a.owner.Service)
				}
			}
			continue
		}
		for p, c := range a.docs.Documents {
			if _, dup := set.text[p]; dup {
				first = twice(first, p)
			}
			set.text[p] = c
		}
		for p, o := range a.docs.Objects {
			if _, dup := set.objs[p]; dup || set.text[p] != "" {
				first = twice(first, p)
				docobj.Delete(context.WithoutCancel(ctx), s.deps.NC, map[string]api.ConfigObject{p: o})
				continue
			}
			set.objs[p] = o
		}
	}
	if len(broken) > 0 {
		sort.Strings(broken)
		first = apierr.Broken(broken)
	}
	if first != nil {
		s.release(ctx, set)
		return docSet{}, first
	}
	return set, nil
}

// twice is the error of a path two owners give, unless there is one.
func twice(first error, p string) error {
	if first != nil {
		return first
	}
	return apierr.Internal("", "configuration document %s claimed by two services", p)
}

func toStrings(v any) []string {
	var out []string
	switch x := v.(type) {
	case []string:
		out = x
	case []any:
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
	}
	return out
}

// savedBy is who a change came from: by@caller, the caller, or "router".
func savedBy(ctx context.Context) string {
	if s := api.OriginOf(ctx).String(); s != "" {
		return s
	}
	return "router"
}

func (s *Service) configStatus(ctx context.Context, _ *api.None) (*api.ConfigStatusAnswer, error) {
	run, err := s.running(ctx)
	if err != nil {
		return nil, err
	}
	latest, err := s.versions.Latest(ctx)
	if err != nil {
		return nil, err
	}
	a := &api.ConfigStatusAnswer{}
	if latest == nil {
		a.Unsaved = true
		a.Changes = confdoc.Compare(confdoc.Docs{}, run)
		return a, nil
	}
	a.Saved = &api.ConfigSavedRef{ID: latest.ID, SavedAt: latest.SavedAt, Comment: latest.Comment}
	a.Latest = latest.ID
	if latest.Digest == confdoc.Digest(run) {
		a.Changes = confdoc.Compare(run, run)
		return a, nil
	}
	saved, err := s.versions.Documents(ctx, latest)
	if err != nil {
		return nil, err
	}
	a.Unsaved = true
	a.Changes = confdoc.Compare(saved, run)
	return a, nil
}

func (s *Service) configVersions(ctx context.Context, in *api.ConfigVersionsRequest) (*api.ConfigVersionList, error) {
	recs, err := s.versions.List(ctx, in.N)
	if err != nil {
		return nil, err
	}
	out := &api.ConfigVersionList{Versions: make([]api.ConfigVersion, len(recs))}
	for i, r := range recs {
		out.Versions[i] = r.ConfigVersion
	}
	out.Count = len(out.Versions)
	return out, nil
}

// save stores the running configuration as a new version, its documents
// streamed from their owners into the version's blobs.
func (s *Service) save(ctx context.Context, comment string, auto bool) (*versions.Record, error) {
	set, err := s.collect(ctx)
	if err != nil {
		return nil, err
	}
	defer s.release(ctx, set)
	return s.versions.SaveSources(ctx, s.sources(ctx, set), savedBy(ctx), comment, auto)
}

func (s *Service) configSave(ctx context.Context, in *api.ConfigSaveRequest) (*api.ConfigSaveAnswer, error) {
	rec, err := s.save(ctx, in.Comment, false)
	if err != nil {
		return nil, err
	}
	a := &api.ConfigSaveAnswer{Saved: rec.ConfigVersion, Version: rec.ID, Files: rec.Files}
	a.Message = fmt.Sprintf("Configuration saved as version %d", rec.ID)
	return a, nil
}

// docsOf returns the documents of a version id, or of the running
// configuration for "running".
func (s *Service) docsOf(ctx context.Context, id string) (confdoc.Docs, error) {
	if id == "running" {
		return s.running(ctx)
	}
	n, err := strconv.ParseInt(id, 10, 64)
	if err != nil || n < 1 {
		return nil, apierr.Invalid("to", "to must be a version id or running")
	}
	rec, err := s.versions.Get(ctx, n)
	if err != nil {
		return nil, err
	}
	return s.versions.Documents(ctx, rec)
}

func (s *Service) configDiff(ctx context.Context, in *api.ConfigDiffRequest) (*api.ConfigDiffAnswer, error) {
	from, err := s.docsOf(ctx, strconv.FormatInt(in.From, 10))
	if err != nil {
		return nil, err
	}
	to, err := s.docsOf(ctx, in.To)
	if err != nil {
		return nil, err
	}
	a := &api.ConfigDiffAnswer{From: in.From, To: in.To, Changes: confdoc.Compare(from, to)}
	if n, err := strconv.ParseInt(in.To, 10, 64); err == nil {
		a.To = n
	}
	a.Diff = confdoc.Diff(confdoc.MaskAll(from), confdoc.MaskAll(to), fmt.Sprintf("version %d", in.From), "version "+in.To)
	if in.To == "running" {
		a.Diff = confdoc.Diff(confdoc.MaskAll(from), confdoc.MaskAll(to), fmt.Sprintf("version %d", in.From), "running")
	}
	return a, nil
}

func (s *Service) configShow(ctx context.Context, in *api.ConfigShowRequest) (*api.ConfigShowAnswer, error) {
	rec, err := s.versions.Get(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	a := &api.ConfigShowAnswer{Version: rec.ConfigVersion}
	if in.Path == "" {
		a.Files = make([]api.ConfigFile, len(rec.Documents))
		for i, f := range rec.Documents {
			a.Files[i] = api.ConfigFile{Path: f.Path, Bytes: f.Bytes, Digest: f.Digest}
		}
		return a, nil
	}
	for _, f := range rec.Documents {
		if f.Path == in.Path {
			c, err := s.versions.Document(ctx, f)
			if err != nil {
				return nil, err
			}
			a.Path, a.Content = f.Path, confdoc.Mask(c)
			return a, nil
		}
	}
	return nil, apierr.NotFound("version %d has no document %s", in.ID, in.Path).With("field", "path")
}

func (s *Service) configAutoSave(ctx context.Context, in *api.ConfigAutoSaveRequest) (*api.ConfigSaveAnswer, error) {
	rec, err := s.save(ctx, in.Comment, true)
	if err != nil {
		return nil, err
	}
	a := &api.ConfigSaveAnswer{Saved: rec.ConfigVersion, Version: rec.ID, Files: rec.Files}
	a.Message = fmt.Sprintf("Configuration saved as version %d", rec.ID)
	return a, nil
}
