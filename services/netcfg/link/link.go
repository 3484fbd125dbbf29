// Package link keeps the VLAN links netcfg owns in the kernel of its target
// namespace: 802.1Q VLANs on a port or bond (vlan<id>), 802.1ad S-VLANs
// (svlan<id>) and C-VLANs inside an S-VLAN (svlan<id>.<cvlan>), the links
// fibre subscribers reach the router on. Apply takes the desired set and
// reconciles both ways: it creates what is missing, recreates what differs,
// deletes the links it owns that are no longer desired, and never touches a
// link it did not create (told apart by the alias `routerd:netcfg`).
package link

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"routerd.dev/proto/kernel"
)

// Alias marks the links netcfg creates.
const Alias = kernel.LinkAliasPrefix + "netcfg"

// Protocols of a VLAN link.
const (
	Dot1Q  = "802.1Q"
	Dot1AD = "802.1ad"
)

// VLAN is one VLAN link as desired.
type VLAN struct {
	// Name is vlan<id>, svlan<id> or svlan<id>.<cvlan>.
	Name string `json:"name"`
	// Parent is the port, bond or (for a C-VLAN) S-VLAN it is on.
	Parent string `json:"parent"`
	// ID is the VLAN id, 1-4094.
	ID int `json:"vlan_id"`
	// Protocol is Dot1Q or Dot1AD.
	Protocol string `json:"protocol"`
	// Up says whether the link is set up (false: disabled, kept).
	Up bool `json:"up"`
}

var namePattern = regexp.MustCompile(`^(vlan|svlan)([0-9]{1,4})(?:\.([0-9]{1,4}))?$`)

// Name is the spec's name of a VLAN of id on parent: vlan<id> for 802.1Q
// on a port or bond, svlan<id> for 802.1ad, svlan<s>.<id> for 802.1Q
// inside the S-VLAN svlan<s>.
func Name(parent string, id int, protocol string) string {
	if protocol == Dot1AD {
		return "svlan" + strconv.Itoa(id)
	}
	if m := namePattern.FindStringSubmatch(parent); m != nil && m[1] == "svlan" && m[3] == "" {
		return parent + "." + strconv.Itoa(id)
	}
	return "vlan" + strconv.Itoa(id)
}

// Check validates a VLAN's fields and that its name is the one its parent,
// id and protocol give.
func (v VLAN) Check() error {
	if v.ID < 1 || v.ID > 4094 {
		return fmt.Errorf("vlan_id %d out of range 1-4094", v.ID)
	}
	if v.Protocol != Dot1Q && v.Protocol != Dot1AD {
		return fmt.Errorf("protocol %q: want %s or %s", v.Protocol, Dot1Q, Dot1AD)
	}
	if v.Parent == "" {
		return errors.New("parent is required")
	}
	if want := Name(v.Parent, v.ID, v.Protocol); v.Name != want {
		return fmt.Errorf("name %q: a %s VLAN %d on %s is %s", v.Name, v.Protocol, v.ID, v.Parent, want)
	}
	return nil
}

// Change is one thing Apply did (or, dry, would do), in `ip link` words.
type Change struct {
	Op   string `json:"op"` // add, delete, recreate, up, down
	Name string `json:"name"`
	Why  string `json:"why,omitempty"`
}

// Manager is the one writer of netcfg's links in one namespace.
type Manager struct {
	mu sync.Mutex
	nl *netlink.Handle
	// Batch, when set (a socket in the same namespace), makes Apply
	// create missing links in batches instead of one round trip each.
	Batch *Batcher
}

// New manages links through nl (bound to the target namespace).
func New(nl *netlink.Handle) *Manager { return &Manager{nl: nl} }

// errNotSupported is what the kernel answers for a link kind it lacks.
var errNotSupported = unix.EOPNOTSUPP

// ErrUnsupported is returned when the kernel cannot make VLAN links (no
// 8021q module); the message says so plainly.
var ErrUnsupported = errors.New("this kernel cannot create VLAN links (802.1Q support, module 8021q, is missing)")

// Apply makes the kernel's netcfg-owned VLAN links exactly desired. It
// stops at the first change the kernel refuses and returns what it did
// before that (the caller's store still holds the intent, so the next Apply
// finishes the job); desired must be valid (Check) and its parents must
// exist or be in desired.
func (m *Manager) Apply(desired []VLAN) ([]Change, error) {
	changes, _, err := m.ApplyIndexed(desired)
	return changes, err
}

// ApplyIndexed is Apply, also returning the index of every link of the
// namespace it knows of afterwards by name (the ones listed at its start
// and the ones it made), so its caller need not list the links again.
func (m *Manager) ApplyIndexed(desired []VLAN) ([]Change, map[string]int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	live, index, err := m.live()
	if err != nil {
		return nil, nil, err
	}
	changes, err := m.apply(desired, live, index)
	return changes, index, err
}

func (m *Manager) apply(desired []VLAN, live map[string]liveLink, index map[string]int) ([]Change, error) {
	want := map[string]VLAN{}
	for _, v := range desired {
		if err := v.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", v.Name, err)
		}
		want[v.Name] = v
	}
	var changes []Change
	// Deletions first, children before parents (deepest names first): a
	// link that goes frees its name and tag for one that comes.
	var gone []string
	for name, l := range live {
		if !l.owned {
			continue
		}
		if w, ok := want[name]; !ok {
			gone = append(gone, name)
		} else if l.differs(w) != "" {
			gone = append(gone, name)
		}
	}
	sort.Slice(gone, func(i, j int) bool {
		return depth(gone[i]) > depth(gone[j]) || depth(gone[i]) == depth(gone[j]) && gone[i] < gone[j]
	})
	recreate := map[string]string{}
	for _, name := range gone {
		l := live[name]
		op, why := "delete", "not configured"
		if w, ok := want[name]; ok {
			op, why = "recreate", l.differs(w)
			recreate[name] = why
		}
		if err := m.nl.LinkDel(l.link); err != nil {
			return changes, fmt.Errorf("delete %s: %w", name, err)
		}
		delete(live, name)
		if op == "delete" {
			changes = append(changes, Change{Op: op, Name: name, Why: why})
		}
	}
	// Additions, parents before children.
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		return depth(names[i]) < depth(names[j]) || depth(names[i]) == depth(names[j]) && names[i] < names[j]
	})
	if m.Batch != nil {
		return m.addBatched(names, want, live, index, recreate, changes)
	}
	for _, name := range names {
		w := want[name]
		if l, ok := live[name]; ok {
			if !l.owned {
				return changes, fmt.Errorf("%s exists and is not routerd's: not touched", name)
			}
			if l.up != w.Up {
				if err := m.setUp(l.link, w.Up); err != nil {
					return changes, err
				}
				changes = append(changes, Change{Op: map[bool]string{true: "up", false: "down"}[w.Up], Name: name})
			}
			continue
		}
		idx, err := m.add(w, index[w.Parent])
		if err != nil {
			return changes, err
		}
		index[name] = idx
		if why, ok := recreate[name]; ok {
			changes = append(changes, Change{Op: "recreate", Name: name, Why: why})
		} else {
			changes = append(changes, Change{Op: "add", Name: name})
		}
	}
	return changes, nil
}

// Ensure makes one link as desired without looking at the others: the
// path of a single change through the API (Apply, which lists every link,
// is for reconciling the whole set). A link of that name that netcfg did
// not create is refused, never changed.
func (m *Manager) Ensure(v VLAN) ([]Change, error) {
	changes, _, err := m.EnsureIndexed(v)
	return changes, err
}

// EnsureIndexed is Ensure, also returning the link's index when it made
// it (0 when it was there): a new link has no addresses yet, so its
// caller can add them without listing any.
func (m *Manager) EnsureIndexed(v VLAN) ([]Change, int, error) {
	if err := v.Check(); err != nil {
		return nil, 0, fmt.Errorf("%s: %w", v.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.nl.LinkByName(v.Name)
	if err != nil {
		idx, err := m.add(v, 0)
		if err != nil {
			return nil, 0, err
		}
		return []Change{{Op: "add", Name: v.Name}}, idx, nil
	}
	changes, err := m.ensureLive(v, l)
	return changes, 0, err
}

// Make creates a link its caller knows is absent, returning its index.
func (m *Manager) Make(v VLAN) (int, error) {
	if err := v.Check(); err != nil {
		return 0, fmt.Errorf("%s: %w", v.Name, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.add(v, 0)
}

func (m *Manager) ensureLive(v VLAN, l netlink.Link) ([]Change, error) {
	ll := m.describe(l)
	if !ll.owned {
		return nil, fmt.Errorf("%s exists and is not routerd's: not touched", v.Name)
	}
	if why := ll.differs(v); why != "" {
		if err := m.nl.LinkDel(l); err != nil {
			return nil, fmt.Errorf("delete %s: %w", v.Name, err)
		}
		if _, err := m.add(v, 0); err != nil {
			return nil, err
		}
		return []Change{{Op: "recreate", Name: v.Name, Why: why}}, nil
	}
	if ll.up != v.Up {
		if err := m.setUp(l, v.Up); err != nil {
			return nil, err
		}
		return []Change{{Op: map[bool]string{true: "up", false: "down"}[v.Up], Name: v.Name}}, nil
	}
	return nil, nil
}

// Remove deletes one link of netcfg's (none of that name: nothing to do).
func (m *Manager) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, err := m.nl.LinkByName(name)
	if err != nil {
		return nil
	}
	if l.Attrs().Alias != Alias {
		return fmt.Errorf("%s is not routerd's: not touched", name)
	}
	if err := m.nl.LinkDel(l); err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	return nil
}

// add creates v on the parent of that index (0: looked up by name) and
// returns the new link's index.
func (m *Manager) add(v VLAN, parentIndex int) (int, error) {
	if parentIndex == 0 {
		parent, err := m.nl.LinkByName(v.Parent)
		if err != nil {
			return 0, fmt.Errorf("%s: parent %s: %w", v.Name, v.Parent, err)
		}
		parentIndex = parent.Attrs().Index
	}
	if m.Batch != nil {
		return m.addOne(v, parentIndex)
	}
	proto := netlink.VLAN_PROTOCOL_8021Q
	if v.Protocol == Dot1AD {
		proto = netlink.VLAN_PROTOCOL_8021AD
	}
	// The up flag rides on the RTM_NEWLINK; the alias does not (the kernel
	// ignores IFLA_IFALIAS when it creates a link), so it is set right
	// after, and a link that cannot be marked is taken out again.
	attrs := netlink.LinkAttrs{Name: v.Name, ParentIndex: parentIndex}
	if v.Up {
		attrs.Flags = net.FlagUp
	}
	l := &netlink.Vlan{LinkAttrs: attrs, VlanId: v.ID, VlanProtocol: proto}
	if err := m.nl.LinkAdd(l); err != nil {
		if errors.Is(err, errNotSupported) {
			return 0, ErrUnsupported
		}
		return 0, fmt.Errorf("add %s: %w", v.Name, err)
	}
	if err := m.nl.LinkSetAlias(l, Alias); err != nil {
		_ = m.nl.LinkDel(l)
		return 0, fmt.Errorf("mark %s: %w", v.Name, err)
	}
	return l.Attrs().Index, nil
}

func (m *Manager) setUp(l netlink.Link, up bool) error {
	var err error
	if up {
		err = m.nl.LinkSetUp(l)
	} else {
		err = m.nl.LinkSetDown(l)
	}
	if err != nil {
		return fmt.Errorf("set %s up=%v: %w", l.Attrs().Name, up, err)
	}
	return nil
}

// depth orders links: ports 0, vlan/svlan 1, svlan.cvlan 2.
func depth(name string) int { return strings.Count(name, ".") + 1 }

type liveLink struct {
	link     netlink.Link
	owned    bool
	parent   string
	id       int
	protocol string
	up       bool
}

func (l liveLink) differs(w VLAN) string {
	switch {
	case l.parent != w.Parent:
		return fmt.Sprintf("parent %s, want %s", l.parent, w.Parent)
	case l.id != w.ID:
		return fmt.Sprintf("id %d, want %d", l.id, w.ID)
	case l.protocol != w.Protocol:
		return fmt.Sprintf("protocol %s, want %s", l.protocol, w.Protocol)
	}
	return ""
}

// live lists the namespace's VLAN links by name, and every link's index
// by name (parents are looked up there, not asked of the kernel again).
func (m *Manager) live() (map[string]liveLink, map[string]int, error) {
	links, err := Links(m.nl)
	if err != nil {
		return nil, nil, fmt.Errorf("listing links: %w", err)
	}
	byIndex := map[int]string{}
	index := map[string]int{}
	for _, l := range links {
		byIndex[l.Attrs().Index] = l.Attrs().Name
		index[l.Attrs().Name] = l.Attrs().Index
	}
	out := map[string]liveLink{}
	for _, l := range links {
		a := l.Attrs()
		ll := liveLink{link: l, owned: a.Alias == Alias, parent: byIndex[a.ParentIndex], up: a.Flags&1 != 0}
		if v, ok := l.(*netlink.Vlan); ok {
			ll.id, ll.protocol = v.VlanId, protocolOf(v)
		} else if !ll.owned {
			continue // not a VLAN, not ours
		}
		out[a.Name] = ll
	}
	return out, index, nil
}

// describe is one link as live lists it, its parent looked up by index.
func (m *Manager) describe(l netlink.Link) liveLink {
	a := l.Attrs()
	ll := liveLink{link: l, owned: a.Alias == Alias, up: a.Flags&1 != 0}
	if p, err := m.nl.LinkByIndex(a.ParentIndex); err == nil {
		ll.parent = p.Attrs().Name
	}
	if v, ok := l.(*netlink.Vlan); ok {
		ll.id, ll.protocol = v.VlanId, protocolOf(v)
	}
	return ll
}

func protocolOf(v *netlink.Vlan) string {
	if v.VlanProtocol == netlink.VLAN_PROTOCOL_8021AD {
		return Dot1AD
	}
	return Dot1Q
}

// Live is a VLAN link as the kernel has it.
type Live struct {
	Name     string `json:"name"`
	Parent   string `json:"parent"`
	ID       int    `json:"vlan_id"`
	Protocol string `json:"protocol"`
	Up       bool   `json:"up"`
	// Owned says netcfg created it (its alias is Alias).
	Owned bool `json:"owned"`
}

// List returns the VLAN links of the namespace, sorted by name.
func (m *Manager) List() ([]Live, error) {
	live, _, err := m.live()
	if err != nil {
		return nil, err
	}
	out := make([]Live, 0, len(live))
	for name, l := range live {
		out = append(out, Live{Name: name, Parent: l.parent, ID: l.id, Protocol: l.protocol, Up: l.up, Owned: l.owned})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
