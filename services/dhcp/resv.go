package dhcp

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"routerd.dev/services/dhcp/config"
)

// Reservations given one at a time (from their own keys in the store,
// see reservations.go), beside those a configuration carries in Clients,
// Services and PD.Pinned. Each change is validated against the served
// networks and the addresses other reservations hold, then applied to the
// running servers as one element change: no recompilation, no listener
// touched, O(1) in the number of reservations. A reconfiguration compiles
// the configuration's reservations and these together.
type reservations struct {
	clients  map[string]config.Client  // by MAC (normalised)
	services map[string]config.Service // by id
	// owner indexes every reserved address, prefix and option 82 port of
	// both sources: "mac:<MAC>" or "svc:<id>".
	owner map[string]string
}

func newReservations() reservations {
	return reservations{clients: map[string]config.Client{}, services: map[string]config.Service{}, owner: map[string]string{}}
}

// ErrReservationConflict is a reservation whose address, prefix or port
// belongs to another one.
var ErrReservationConflict = errors.New("in use by another reservation")

func addrKey(a netip.Addr) string     { return "a|" + a.String() }
func prefKey(p netip.Prefix) string   { return "p|" + p.String() }
func portKey(s config.Service) string { return fmt.Sprintf("o|%s|%s|%d", s.OLT, s.PON, s.ONTID) }

func clientKeys(c config.Client) []string {
	k := []string{addrKey(c.IP)}
	if c.IPv6.IsValid() {
		k = append(k, addrKey(c.IPv6))
	}
	if c.Prefix6.IsValid() {
		k = append(k, prefKey(c.Prefix6))
	}
	return k
}

func serviceKeys(s config.Service) []string { return []string{addrKey(s.IPv4), portKey(s)} }

// withReservations is cfg with the element reservations added to its own
// (a client's pinned prefix goes to PD.Pinned), as the servers compile it.
func (e *Engine) withReservations(cfg config.Config) config.Config {
	r := &e.res
	if len(r.clients) == 0 && len(r.services) == 0 {
		return cfg
	}
	full := cfg
	full.Clients = make([]config.Client, 0, len(cfg.Clients)+len(r.clients))
	full.Services = make([]config.Service, 0, len(cfg.Services)+len(r.services))
	full.PD.Pinned = nil
	// An element reservation replaces the configuration's own of the same
	// MAC or id.
	for _, c := range cfg.Clients {
		if m, _ := config.NormalizeMAC(c.MAC); !r.has(m) {
			full.Clients = append(full.Clients, c)
		}
	}
	for _, p := range cfg.PD.Pinned {
		if m, _ := config.NormalizeMAC(p.MAC); !r.has(m) {
			full.PD.Pinned = append(full.PD.Pinned, p)
		}
	}
	for _, s := range cfg.Services {
		if _, ok := r.services[s.ID]; !ok {
			full.Services = append(full.Services, s)
		}
	}
	for _, c := range r.clients {
		full.Clients = append(full.Clients, c)
		if c.Prefix6.IsValid() {
			full.PD.Pinned = append(full.PD.Pinned, config.Pinned{MAC: c.MAC, Hostname: c.Hostname, Prefix: c.Prefix6})
		}
	}
	for _, s := range r.services {
		full.Services = append(full.Services, s)
	}
	return full
}

func (r *reservations) has(mac string) bool { _, ok := r.clients[mac]; return ok }

func (e *Engine) client(mac string) (config.Client, bool) {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	c, ok := e.res.clients[mac]
	return c, ok
}

func (e *Engine) service(id string) (config.Service, bool) {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	c, ok := e.res.services[id]
	return c, ok
}

// indexOwners rebuilds the owner index from a compiled configuration.
func (r *reservations) indexOwners(full config.Config) {
	r.owner = make(map[string]string, 2*(len(full.Clients)+len(full.Services)))
	for _, c := range full.Clients {
		m, _ := config.NormalizeMAC(c.MAC)
		for _, k := range clientKeys(c) {
			r.owner[k] = "mac:" + m
		}
	}
	for _, p := range full.PD.Pinned {
		m, _ := config.NormalizeMAC(p.MAC)
		r.owner[prefKey(p.Prefix)] = "mac:" + m
	}
	for _, s := range full.Services {
		for _, k := range serviceKeys(s) {
			r.owner[k] = "svc:" + s.ID
		}
	}
}

// probe validates one reservation against the served networks, by
// validating a configuration holding only it.
func probe(cfg config.Config, clients []config.Client, services []config.Service) error {
	p := cfg
	p.Clients, p.Services, p.PD.Pinned = nil, services, nil
	for _, c := range clients {
		p.Clients = append(p.Clients, c)
		if c.Prefix6.IsValid() {
			p.PD.Pinned = append(p.PD.Pinned, config.Pinned{MAC: c.MAC, Prefix: c.Prefix6})
		}
	}
	return p.Validate()
}

func (r *reservations) conflict(keys []string, self string) error {
	for _, k := range keys {
		if o, ok := r.owner[k]; ok && o != self {
			return fmt.Errorf("%w: %s held by %s", ErrReservationConflict, k[2:], strings.TrimPrefix(strings.TrimPrefix(o, "mac:"), "svc:"))
		}
	}
	return nil
}

// PutClient adds or replaces a MAC client's reservation and serves it from
// the next request on. It reports whether the client was new.
func (e *Engine) PutClient(c config.Client) (created bool, err error) {
	m, err := config.NormalizeMAC(c.MAC)
	if err != nil {
		return false, err
	}
	c.MAC = m
	e.resMu.Lock()
	defer e.resMu.Unlock()
	if err := probe(e.Config(), []config.Client{c}, nil); err != nil {
		return false, err
	}
	self := "mac:" + m
	keys := clientKeys(c)
	if err := e.res.conflict(keys, self); err != nil {
		return false, err
	}
	old, had := e.res.clients[m]
	var oldp *config.Client
	if had {
		oldp = &old
		for _, k := range clientKeys(old) {
			delete(e.res.owner, k)
		}
	}
	for _, k := range keys {
		e.res.owner[k] = self
	}
	e.res.clients[m] = c
	e.v4.SetClient(oldp, &c)
	e.v6.SetClient(oldp, &c)
	return !had, nil
}

// DeleteClient removes a MAC client's reservation; false when it had none.
func (e *Engine) DeleteClient(mac string) bool {
	m, err := config.NormalizeMAC(mac)
	if err != nil {
		return false
	}
	e.resMu.Lock()
	defer e.resMu.Unlock()
	old, ok := e.res.clients[m]
	if !ok {
		return false
	}
	delete(e.res.clients, m)
	for _, k := range clientKeys(old) {
		if e.res.owner[k] == "mac:"+m {
			delete(e.res.owner, k)
		}
	}
	e.v4.SetClient(&old, nil)
	e.v6.SetClient(&old, nil)
	return true
}

// PutService adds or replaces a fibre service's binding; it reports
// whether the service was new.
func (e *Engine) PutService(s config.Service) (created bool, err error) {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	if err := probe(e.Config(), nil, []config.Service{s}); err != nil {
		return false, err
	}
	self := "svc:" + s.ID
	keys := serviceKeys(s)
	if err := e.res.conflict(keys, self); err != nil {
		return false, err
	}
	old, had := e.res.services[s.ID]
	var oldp *config.Service
	if had {
		oldp = &old
		for _, k := range serviceKeys(old) {
			delete(e.res.owner, k)
		}
	}
	for _, k := range keys {
		e.res.owner[k] = self
	}
	e.res.services[s.ID] = s
	e.v4.SetService(oldp, &s)
	return !had, nil
}

// DeleteService removes a service's binding; false when it had none.
func (e *Engine) DeleteService(id string) bool {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	old, ok := e.res.services[id]
	if !ok {
		return false
	}
	delete(e.res.services, id)
	for _, k := range serviceKeys(old) {
		if e.res.owner[k] == "svc:"+id {
			delete(e.res.owner, k)
		}
	}
	e.v4.SetService(&old, nil)
	return true
}

// SetReservations replaces every element reservation at once (the load
// at start and at reload): one compilation, validated whole with the
// configuration in force; refused whole.
func (e *Engine) SetReservations(clients []config.Client, services []config.Service) error {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	prev := e.res
	e.res = newReservations()
	for _, c := range clients {
		m, err := config.NormalizeMAC(c.MAC)
		if err != nil {
			e.res = prev
			return err
		}
		c.MAC = m
		e.res.clients[m] = c
	}
	for _, s := range services {
		e.res.services[s.ID] = s
	}
	if err := e.reconfigureLocked(e.Config()); err != nil {
		e.res = prev
		return err
	}
	return nil
}

// ReservationCounts says how many element reservations the engine holds.
func (e *Engine) ReservationCounts() (clients, services int) {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	return len(e.res.clients), len(e.res.services)
}

// reservedIn counts the reservations (of both sources) inside p.
func (e *Engine) reservedIn(p netip.Prefix) int {
	e.resMu.Lock()
	defer e.resMu.Unlock()
	n := 0
	seen := map[string]bool{}
	for k, o := range e.res.owner {
		if strings.HasPrefix(k, "a|") && !seen[o] {
			if a, err := netip.ParseAddr(k[2:]); err == nil && p.Contains(a) {
				seen[o] = true
				n++
			}
		}
	}
	return n
}

// clientsSorted and servicesSorted list the element reservations.
func (e *Engine) clientsSorted() []config.Client {
	e.resMu.Lock()
	out := make([]config.Client, 0, len(e.res.clients))
	for _, c := range e.res.clients {
		out = append(out, c)
	}
	e.resMu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].MAC < out[j].MAC })
	return out
}
