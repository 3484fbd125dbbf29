package shaper

import (
	"encoding/json"
	"sort"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/bus"
)

// Endpoints are the service's operations (bus only: the subscribers
// service calls them).
func (s *Service) Endpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.ShaperSet, s.Set),
		bus.Bind(api.ShaperRemove, s.Remove),
		bus.Bind(api.ShaperPlan, s.Plan),
		bus.Bind(api.ShaperPage, s.Page),
		bus.Bind(api.ShaperCounters, s.Counters),
		bus.Bind(api.ShaperStatus, s.Status),
	}
}

const storeUndoTimeout = 5 * time.Second

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
