package graph

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/gosnmp/gosnmp"

	"routerd.dev/proto/api"
	"routerd.dev/services/graph/snmp"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
	"routerd.dev/shared/version"
)

// The SNMP agent's settings are one etcd document (snmpKey) holding the
// community sealed (snmpseal.go), sysLocation and sysContact; the same
// JSON is the configuration document etc/snmp.json of saved versions,
// backup and restore. The agent runs while a community is set: there is
// no default community.

const (
	snmpKey = "snmp"
	// SNMPDocument is the settings' configuration document.
	SNMPDocument = "etc/snmp.json"
	// ClientRefresh is how often the per-client table is read again from
	// the subscribers and the shaper: it may hold 100,000 rows, so it is
	// never read per request.
	ClientRefresh = 30 * time.Second
	// linkTTL is how long one netlink dump serves the interface tables.
	linkTTL = time.Second
	// retryListen is how often an enabled agent that could not bind (the
	// port taken at start) tries again.
	retryListen = 10 * time.Second
)

// snmpSettings are the stored settings and etc/snmp.json.
type snmpSettings struct {
	// Community is sealed ("v1:..."); "" is no community, the agent off.
	Community string `json:"community"`
	Location  string `json:"location"`
	Contact   string `json:"contact"`
}

// snmpArea is the SNMP agent's state in the service.
type snmpArea struct {
	once    sync.Once
	agent   *snmp.Agent
	links   *snmp.LinkSource
	clients snmp.ClientTable
	seal    sealer
	kick    chan struct{} // asks the refresher for the client table now
	// sys is the system group's text, read by the agent's loops without
	// mu: applySNMP closes the agent under mu and waits for its loops.
	sys atomic.Pointer[snmp.System]

	// mu serialises changes of the settings and the agent's start and
	// stop; it also guards the fields below.
	mu        sync.Mutex
	enabled   bool   // a community is set
	opened    bool   // and it opened with this router's key: the agent should run
	problem   string // why an enabled agent is not running
	counters  string // the counter columns' source, or why they are left out
	refreshed time.Time
}

// snmpInit builds the agent and its MIB once (an endpoint may be called
// before runSNMP has started).
func (s *Service) snmpInit() {
	a := &s.snmp
	a.once.Do(func() {
		a.seal.dir = s.deps.StateDir
		a.kick = make(chan struct{}, 1)
		a.links = &snmp.LinkSource{NS: s.deps.NS, TTL: linkTTL, Log: s.deps.Log}
		a.sys.Store(&snmp.System{Descr: sysDescr(), Name: hostname()})
		a.counters = "not read yet"
		a.agent = snmp.NewAgent(nil, s.deps.Log)
		sys := func() snmp.System { return *a.sys.Load() }
		trees := []snmp.Subtree{snmp.SystemGroup(sys, s.deps.Now(), s.deps.Now), snmp.SNMPGroup(&a.agent.Stats)}
		trees = append(trees, snmp.IfMIB(a.links)...)
		trees = append(trees, a.clients.Subtrees()...)
		a.agent.MIB = snmp.NewMIB(trees...)
	})
}

func sysDescr() string {
	rel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(fmt.Sprintf("routerd %s subscriber-access router, Linux %s", version.Version, strings.TrimSpace(string(rel))))
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// snmpEndpoints are GET and POST /snmp and the settings' configuration
// document.
func (s *Service) snmpEndpoints() []bus.Endpoint {
	return []bus.Endpoint{
		bus.Bind(api.SNMPStatus, s.snmpStatus),
		bus.Bind(api.SNMPSetOp, s.snmpSet),
		bus.Bind(api.SNMPConfig.Export, s.snmpExport),
		bus.Bind(api.SNMPConfig.Import, s.snmpImport),
	}
}

// runSNMP runs the SNMP agent until ctx ends: it starts it from the
// stored settings, tries again while an enabled agent cannot bind, and
// refreshes the per-client table.
func (s *Service) runSNMP(ctx context.Context) {
	s.snmpInit()
	a := &s.snmp
	defer a.agent.Close()
	for {
		set, _, err := s.loadSNMP(ctx)
		if err == nil {
			a.mu.Lock()
			if err := s.applySNMP(set); err != nil {
				s.deps.Log.Error("snmp: agent not started", "err", err)
			}
			a.mu.Unlock()
			break
		}
		s.deps.Log.Warn("snmp: settings not read; trying again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
	retry := time.NewTicker(retryListen)
	defer retry.Stop()
	refresh := time.NewTimer(0)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-retry.C:
			a.mu.Lock()
			if a.opened && !a.agent.Running() {
				if err := s.listen(); err == nil {
					s.deps.Log.Info("snmp: agent running", "listen", a.agent.Listening())
				}
			}
			a.mu.Unlock()
		case <-a.kick:
			s.refreshClients(ctx)
			refresh.Reset(ClientRefresh)
		case <-refresh.C:
			s.refreshClients(ctx)
			refresh.Reset(ClientRefresh)
		}
	}
}

// loadSNMP reads the stored settings; none stored is the zero settings
// at revision 0.
func (s *Service) loadSNMP(ctx context.Context) (snmpSettings, int64, error) {
	v, rev, err := store.Get[snmpSettings](ctx, s.st, s.st.Key(snmpKey))
	if errors.Is(err, store.ErrNotFound) {
		return snmpSettings{}, 0, nil
	}
	return v, rev, err
}

// applySNMP makes the agent serve set (a.mu held): a community opens the
// agent (bound now if it is not), none closes it. The error is why an
// enabled agent does not run.
func (s *Service) applySNMP(set snmpSettings) error {
	a := &s.snmp
	sys := *a.sys.Load()
	sys.Location, sys.Contact = set.Location, set.Contact
	a.sys.Store(&sys)
	community, err := a.seal.open(set.Community)
	if err != nil {
		a.agent.SetCommunity("")
		a.agent.Close()
		a.enabled, a.opened, a.problem = set.Community != "", false, err.Error()
		return err
	}
	a.agent.SetCommunity(community)
	a.enabled, a.opened, a.problem = community != "", community != "", ""
	if community == "" {
		a.agent.Close()
		return nil
	}
	if a.agent.Running() {
		return nil
	}
	if err := s.listen(); err != nil {
		return err
	}
	select {
	case a.kick <- struct{}{}:
	default:
	}
	return nil
}

// listen binds the agent's sockets (a.mu held), noting why it cannot.
func (s *Service) listen() error {
	a := &s.snmp
	if err := a.agent.Listen(s.deps.NS, s.deps.SNMPPort); err != nil {
		a.problem = fmt.Sprintf("cannot listen on UDP %d: %v", s.deps.SNMPPort, err)
		return errors.New(a.problem)
	}
	a.problem = ""
	return nil
}

// snmpSet is POST /snmp: the changed settings are stored and served; when
// the agent cannot start with them, the previous settings are put back
// (store and agent) and the answer is a 500 with the reason in detail.
func (s *Service) snmpSet(ctx context.Context, r *api.SNMPSet) (*api.SNMPSetAnswer, error) {
	s.snmpInit()
	a := &s.snmp
	a.mu.Lock()
	defer a.mu.Unlock()
	cur, rev, err := s.loadSNMP(ctx)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "SNMP settings not saved: the stored settings cannot be read")
	}
	next := cur
	// The same community again keeps its sealed form, so that saved
	// versions do not differ by a fresh nonce alone.
	if prev, oerr := a.seal.open(cur.Community); r.Community != nil && (oerr != nil || prev != *r.Community) {
		if next.Community, err = a.seal.seal(*r.Community); err != nil {
			return nil, apierr.Internal(err.Error(), "SNMP settings not saved: the community cannot be sealed")
		}
	}
	if r.Location != nil {
		next.Location = *r.Location
	}
	if r.Contact != nil {
		next.Contact = *r.Contact
	}
	if err := s.storeSNMP(ctx, next, rev); err != nil {
		return nil, apierr.Internal(err.Error(), "SNMP settings not saved")
	}
	if err := s.applySNMP(next); err != nil {
		s.putBack(ctx, cur)
		return nil, apierr.Internal(err.Error(), "SNMP agent did not start; the previous settings are back")
	}
	s.deps.Log.Info("snmp: settings changed", "community_changed", r.Community != nil, "location_changed", r.Location != nil, "contact_changed", r.Contact != nil, "listen", a.agent.Listening())
	msg := "SNMP settings saved; the agent is running"
	if !a.enabled {
		msg = "SNMP settings saved; the agent stays off until a community is set"
	}
	return &api.SNMPSetAnswer{Result: api.Result{OK: true, Code: 200, Message: msg}, Detail: a.agent.Listening()}, nil
}

// storeSNMP writes the settings if they are still at rev (0: absent).
func (s *Service) storeSNMP(ctx context.Context, set snmpSettings, rev int64) error {
	key := s.st.Key(snmpKey)
	_, err := s.st.Txn().IfRevision(key, rev).Put(key, set).Commit(ctx)
	return err
}

// putBack restores prev in the store and the agent after a change whose
// agent did not start (a.mu held).
func (s *Service) putBack(ctx context.Context, prev snmpSettings) {
	ctx = context.WithoutCancel(ctx)
	t := s.st.Txn()
	if prev == (snmpSettings{}) {
		t = t.Delete(s.st.Key(snmpKey))
	} else {
		t = t.Put(s.st.Key(snmpKey), prev)
	}
	_, serr := t.Commit(ctx)
	aerr := s.applySNMP(prev)
	s.deps.Log.Error("snmp: the agent did not start with the new settings; previous settings restored", "restore_store", serr, "restore_agent", aerr)
}

// snmpStatus is GET /snmp.
func (s *Service) snmpStatus(_ context.Context, _ *api.None) (*api.SNMPState, error) {
	s.snmpInit()
	a := &s.snmp
	a.mu.Lock()
	st := &api.SNMPState{
		Running: a.agent.Running(), Enabled: "no", CommunitySet: a.enabled,
		SysLocation: a.sys.Load().Location, SysContact: a.sys.Load().Contact,
		Version: "2c", Access: "read-only",
		MIBs:        "SNMPv2-MIB system and snmp groups; IF-MIB ifNumber, ifTable, ifXTable; the per-client table",
		ClientTable: snmp.ClientTableOID.String() + " (index: MAC as six sub-identifiers; 1 MAC, 2 IPv4 address, 3 hostname, 4 plan, 5 bytes to the client, 6 bytes from the client), row count " + snmp.ClientCountOID.String() + ".0",
		Counters:    a.counters,
		Problem:     a.problem,
		Listen:      a.agent.Listening(),
	}
	if a.enabled {
		st.Enabled = "yes"
	}
	if !a.refreshed.IsZero() {
		st.RefreshedAt = a.refreshed.Format("2006-01-02 15:04:05")
	}
	a.mu.Unlock()
	if st.Listen == "" {
		st.Listen = fmt.Sprintf("udp:%d, udp6:%d", s.deps.SNMPPort, s.deps.SNMPPort)
	}
	st.PerClientCount = a.clients.Rows().Len()
	st.Requests, st.BadCommunity = a.agent.Stats.InPkts.Load(), a.agent.Stats.BadCommunityNames.Load()
	st.Sample = s.snmpSample()
	return st, nil
}

// snmpSample reads a few variables an operator can check a poller
// against: the system group's, the interface count, the first
// interface's 64-bit input bytes, the client count and the first client's
// download bytes.
func (s *Service) snmpSample() []api.SNMPSample {
	m := s.snmp.agent.MIB
	out := []api.SNMPSample{}
	add := func(name string, o snmp.OID, v snmp.Value) {
		out = append(out, api.SNMPSample{OID: o.String(), Name: name, Value: valueText(v)})
	}
	for _, g := range []struct {
		name string
		oid  snmp.OID
	}{
		{"sysDescr.0", snmp.SystemOID.Append(1, 0)},
		{"sysUpTime.0", snmp.SystemOID.Append(3, 0)},
		{"sysContact.0", snmp.SystemOID.Append(4, 0)},
		{"sysName.0", snmp.SystemOID.Append(5, 0)},
		{"sysLocation.0", snmp.SystemOID.Append(6, 0)},
		{"ifNumber.0", snmp.IfNumberOID.Append(0)},
		{"routerdClientCount.0", snmp.ClientCountOID.Append(0)},
	} {
		add(g.name, g.oid, m.Get(g.oid))
	}
	// The first row of a column: GetNext on the column itself.
	for _, g := range []struct {
		name string
		col  snmp.OID
	}{
		{"ifHCInOctets", snmp.IfXTableOID.Append(1, 6)},
		{"routerdClientDownBytes", snmp.ClientTableOID.Append(1, snmp.ClientDownBytes)},
	} {
		if o, v, ok := m.Next(g.col); ok && o.HasPrefix(g.col) {
			add(g.name+"."+strings.TrimPrefix(o.String(), g.col.String()+"."), o, v)
		}
	}
	return out
}

// valueText is a value as an operator reads it.
func valueText(v snmp.Value) string {
	switch v.Type {
	case gosnmp.NoSuchObject:
		return "noSuchObject"
	case gosnmp.NoSuchInstance:
		return "noSuchInstance"
	case gosnmp.IPAddress:
		if b, ok := v.V.([]byte); ok && len(b) == 4 {
			return netip.AddrFrom4([4]byte(b)).String()
		}
	case gosnmp.OctetString:
		var b []byte
		switch x := v.V.(type) {
		case string:
			b = []byte(x)
		case []byte:
			b = x
		}
		if printable(b) {
			return string(b)
		}
		return strings.ToUpper(hex.EncodeToString(b))
	}
	switch x := v.V.(type) {
	case int:
		return strconv.Itoa(x)
	case uint32:
		return strconv.FormatUint(uint64(x), 10)
	case uint64:
		return strconv.FormatUint(x, 10)
	case string:
		return x
	}
	return fmt.Sprint(v.V)
}

func printable(b []byte) bool {
	for _, r := range string(b) {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// refreshClients reads the per-client table again: every client from the
// subscribers service, page by page, then the shaper's counters joined on
// the MAC. A subscribers service that does not answer keeps the previous
// table; a shaper that does not answer leaves the counter columns out.
func (s *Service) refreshClients(ctx context.Context) {
	a := &s.snmp
	a.mu.Lock()
	enabled := a.enabled
	a.mu.Unlock()
	if !enabled {
		return
	}
	var rows []snmp.ClientRow
	at := map[[6]byte]int{}
	for after := ""; ; {
		p, err := bus.Invoke(ctx, s.deps.NC, api.ClientsPage, &api.ClientPageRequest{After: after, Limit: 5000})
		if err != nil {
			s.deps.Log.Warn("snmp: clients not read; the per-client table stays as it was", "err", err)
			return
		}
		for _, c := range p.Clients {
			hw, err := net.ParseMAC(c.MAC)
			if err != nil || len(hw) != 6 {
				continue
			}
			r := snmp.ClientRow{MAC: [6]byte(hw), Hostname: c.Hostname}
			if c.Plan != nil {
				r.Plan = *c.Plan
			}
			if ip, err := netip.ParseAddr(c.IP); err == nil && ip.Is4() {
				r.IP, r.HasIP = ip.As4(), true
			}
			at[r.MAC] = len(rows)
			rows = append(rows, r)
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	note := "shaper"
	for after := ""; ; {
		p, err := bus.Invoke(ctx, s.deps.NC, api.ShaperCounters, &api.ShapePageRequest{After: after, Limit: 5000})
		if err != nil {
			note = "left out: the shaper did not give its counters (" + apierr.From(err).Message + ")"
			for i := range rows {
				rows[i].Counted, rows[i].Down, rows[i].Up = false, 0, 0
			}
			break
		}
		for _, c := range p.Counters {
			hw, err := net.ParseMAC(c.ID)
			if err != nil || len(hw) != 6 {
				continue // a fibre service's id: not in this table
			}
			if i, ok := at[[6]byte(hw)]; ok {
				rows[i].Counted, rows[i].Down, rows[i].Up = true, c.DownBytes, c.UpBytes
			}
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	t := snmp.NewClientRows(rows)
	a.clients.Set(t)
	a.mu.Lock()
	a.counters, a.refreshed = note, s.deps.Now()
	if note == "shaper" {
		a.counters = fmt.Sprintf("shaper (%d of %d clients shaped)", t.Counted(), t.Len())
	}
	a.mu.Unlock()
}

// snmpExport renders the settings as etc/snmp.json (the community stays
// sealed; config-show masks it besides).
func (s *Service) snmpExport(ctx context.Context, _ *api.None) (*api.ConfigDocuments, error) {
	v, _, err := store.Get[snmpSettings](ctx, s.st, s.st.Key(snmpKey))
	switch {
	case errors.Is(err, store.ErrNotFound):
		v = snmpSettings{}
	case err != nil:
		var be *store.BrokenError
		if errors.As(err, &be) {
			return nil, apierr.Broken([]string{SNMPDocument})
		}
		return nil, err
	}
	out, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return nil, err
	}
	return &api.ConfigDocuments{Documents: map[string]string{SNMPDocument: string(out) + "\n"}}, nil
}

// snmpImport replaces the settings with etc/snmp.json and serves them. A
// community in clear (a hand-written document) that meets the rule is
// sealed on the way in. A sealed community that does not open with this
// router's key (a backup of another router) is stored as it is: the agent
// then stays off and GET /snmp says why, rather than failing the whole
// restore. An agent that cannot bind is not a failed import either (the
// port may be free later; it is retried). Without the document nothing
// changes; one that does not parse is a 400 and nothing changes.
func (s *Service) snmpImport(ctx context.Context, in *api.ConfigDocuments) (*api.ConfigImported, error) {
	text, ok := in.Documents[SNMPDocument]
	if !ok {
		return &api.ConfigImported{Documents: []string{}}, nil
	}
	s.snmpInit()
	a := &s.snmp
	var next snmpSettings
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&next); err != nil {
		return nil, apierr.Invalid("documents", "%s does not parse: %v", SNMPDocument, err).With("broken_data_files", []string{SNMPDocument})
	}
	if len(next.Location) > 255 || len(next.Contact) > 255 {
		return nil, apierr.Invalid("documents", "%s: location and contact are at most 255 characters", SNMPDocument)
	}
	if next.Community != "" && !sealed(next.Community) {
		if !api.ValidCommunity(next.Community) {
			return nil, apierr.Invalid("documents", "%s: invalid community: 1-64 characters from A-Z a-z 0-9 _ . : -, or a sealed one", SNMPDocument)
		}
		c, err := a.seal.seal(next.Community)
		if err != nil {
			return nil, apierr.Internal(err.Error(), "%s: the community cannot be sealed", SNMPDocument)
		}
		next.Community = c
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := s.st.Txn().Put(s.st.Key(snmpKey), next).Commit(ctx); err != nil {
		return nil, apierr.Internal(err.Error(), "%s not stored", SNMPDocument)
	}
	if err := s.applySNMP(next); err != nil {
		s.deps.Log.Warn("snmp: imported settings stored; the agent is not running", "err", err)
	}
	return &api.ConfigImported{Documents: []string{SNMPDocument}}, nil
}
