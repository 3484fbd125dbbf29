package link_test

import (
	"errors"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"routerd.dev/services/netcfg/link"
	"routerd.dev/shared/netns"
	"routerd.dev/shared/testenv"
)

func TestName(t *testing.T) {
	for _, tc := range []struct {
		parent, proto string
		id            int
		want          string
	}{
		{"ge0", link.Dot1Q, 100, "vlan100"},
		{"bond0", link.Dot1Q, 7, "vlan7"},
		{"ge0", link.Dot1AD, 200, "svlan200"},
		{"svlan200", link.Dot1Q, 300, "svlan200.300"},
		{"vlan100", link.Dot1Q, 5, "vlan5"},
	} {
		if got := link.Name(tc.parent, tc.id, tc.proto); got != tc.want {
			t.Errorf("Name(%s, %d, %s) = %s, want %s", tc.parent, tc.id, tc.proto, got, tc.want)
		}
	}
	for _, v := range []link.VLAN{
		{Name: "vlan0", Parent: "ge0", ID: 0, Protocol: link.Dot1Q},
		{Name: "vlan4095", Parent: "ge0", ID: 4095, Protocol: link.Dot1Q},
		{Name: "vlan10", Parent: "ge0", ID: 10, Protocol: "802.1x"},
		{Name: "vlan10", Parent: "", ID: 10, Protocol: link.Dot1Q},
		{Name: "svlan10", Parent: "ge0", ID: 10, Protocol: link.Dot1Q},
	} {
		if v.Check() == nil {
			t.Errorf("%+v passed Check", v)
		}
	}
}

// fullKernel skips a test where the kernel cannot make VLAN links: this
// machine's kernel may lack 802.1Q; `make vm` runs these tests (named
// TestFullKernel...) in a VM with Debian's kernel.
func fullKernel(t *testing.T, ns *netns.NS) {
	t.Helper()
	testenv.Run(t, ns, "ip", "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
	defer testenv.Run(t, ns, "ip", "link", "del", "probe0")
	nl, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	_, err = link.New(nl).Apply([]link.VLAN{{Name: "vlan9", Parent: "probe0", ID: 9, Protocol: link.Dot1Q}})
	if errors.Is(err, link.ErrUnsupported) {
		t.Skip("this kernel has no 802.1Q VLAN links: the VM tier (make vm) runs this test on Debian's kernel")
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := link.New(nl).Apply(nil); err != nil {
		t.Fatal(err)
	}
}

// listing is the namespace's links as `ip -d link` shows them, reduced to
// what identifies each (name, parent, VLAN protocol and id, alias, up),
// sorted: the complete kernel state of links, compared whole.
func listing(t *testing.T, ns *netns.NS) string {
	t.Helper()
	out := testenv.Run(t, ns, "ip", "-o", "-d", "link", "show")
	head := regexp.MustCompile(`^\d+: ([^:@]+)(?:@([^:]+))?: <([^>]*)>`)
	vlan := regexp.MustCompile(`vlan protocol (\S+) id (\d+)`)
	alias := regexp.MustCompile(`alias (\S+)`)
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		m := head.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		s := m[1]
		if m[2] != "" {
			s += "@" + m[2]
		}
		if v := vlan.FindStringSubmatch(l); v != nil {
			s += " vlan " + v[1] + " " + v[2]
		}
		if a := alias.FindStringSubmatch(l); a != nil {
			s += " alias " + a[1]
		}
		if strings.Contains(","+m[3]+",", ",UP,") {
			s += " UP"
		}
		lines = append(lines, s)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// Apply reconciles both ways: it creates the desired 802.1Q VLAN, S-VLAN
// and C-VLAN inside it, deletes a link of its own that is no longer
// desired, leaves the operator's VLAN alone; the second apply changes
// nothing, and the complete listing says so. Both ways of making links:
// a request at a time, and in batches (the reconcile's).
func TestFullKernelApplyTwice(t *testing.T) {
	t.Run("one by one", func(t *testing.T) { applyTwice(t, false) })
	t.Run("batched", func(t *testing.T) { applyTwice(t, true) })
}

func applyTwice(t *testing.T, batched bool) {
	ns := testenv.Netns(t)
	fullKernel(t, ns)
	testenv.Run(t, ns, "ip", "link", "add", "ge0", "type", "veth", "peer", "name", "peer0")
	testenv.Run(t, ns, "ip", "link", "set", "ge0", "up")
	// The operator's own VLAN, and a stale one of netcfg's.
	testenv.Run(t, ns, "ip", "link", "add", "link", "ge0", "name", "vlan999", "type", "vlan", "id", "999")
	testenv.Run(t, ns, "ip", "link", "add", "link", "ge0", "name", "vlan50", "type", "vlan", "id", "50")
	testenv.Run(t, ns, "ip", "link", "set", "vlan50", "alias", link.Alias)
	// A link of netcfg's name whose id is wrong: recreated.
	testenv.Run(t, ns, "ip", "link", "add", "link", "ge0", "name", "vlan100", "type", "vlan", "id", "101")
	testenv.Run(t, ns, "ip", "link", "set", "vlan100", "alias", link.Alias)

	nl, err := ns.Netlink()
	if err != nil {
		t.Fatal(err)
	}
	defer nl.Close()
	m := link.New(nl)
	if batched {
		if err := ns.Do(func() (err error) { m.Batch, err = link.NewBatcher(); return err }); err != nil {
			t.Fatal(err)
		}
		defer m.Batch.Close()
	}
	desired := []link.VLAN{
		{Name: "svlan200.300", Parent: "svlan200", ID: 300, Protocol: link.Dot1Q, Up: true},
		{Name: "vlan100", Parent: "ge0", ID: 100, Protocol: link.Dot1Q, Up: true},
		{Name: "svlan200", Parent: "ge0", ID: 200, Protocol: link.Dot1AD, Up: true},
		{Name: "vlan7", Parent: "ge0", ID: 7, Protocol: link.Dot1Q, Up: false},
	}
	changes, err := m.Apply(desired)
	if err != nil {
		t.Fatal(err)
	}
	wantChanges := []link.Change{
		{Op: "delete", Name: "vlan50", Why: "not configured"},
		{Op: "add", Name: "svlan200"},
		{Op: "recreate", Name: "vlan100", Why: "id 101, want 100"},
		{Op: "add", Name: "vlan7"},
		{Op: "add", Name: "svlan200.300"},
	}
	if diff := cmp.Diff(wantChanges, changes); diff != "" {
		t.Errorf("first apply's changes (-want +got):\n%s", diff)
	}
	want := strings.Join([]string{
		"ge0@peer0 UP",
		"lo",
		"peer0@ge0",
		"svlan200.300@svlan200 vlan 802.1Q 300 alias routerd:netcfg UP",
		"svlan200@ge0 vlan 802.1ad 200 alias routerd:netcfg UP",
		"vlan100@ge0 vlan 802.1Q 100 alias routerd:netcfg UP",
		"vlan7@ge0 vlan 802.1Q 7 alias routerd:netcfg",
		"vlan999@ge0 vlan 802.1Q 999",
	}, "\n")
	first := listing(t, ns)
	if diff := cmp.Diff(want, first); diff != "" {
		t.Errorf("links after the first apply (-want +got):\n%s", diff)
	}
	changes, err = m.Apply(desired)
	if err != nil || len(changes) != 0 {
		t.Errorf("second apply: changes %v, err %v; want none", changes, err)
	}
	if diff := cmp.Diff(first, listing(t, ns)); diff != "" {
		t.Errorf("the second apply changed the kernel (-first +second):\n%s", diff)
	}
	// Nothing desired: every link of netcfg's goes, the operator's stays.
	if _, err := m.Apply(nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff("ge0@peer0 UP\nlo\npeer0@ge0\nvlan999@ge0 vlan 802.1Q 999", listing(t, ns)); diff != "" {
		t.Errorf("after removing all (-want +got):\n%s", diff)
	}
}
