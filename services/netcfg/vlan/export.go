package vlan

import (
	"context"
	"fmt"
	"net/netip"
	"sort"

	"routerd.dev/shared/apierr"
)

// Document is etc/vlans.json, the VLANs and the addresses netcfg added to
// ports, as configuration documents, backups and restores speak of them.
type Document struct {
	VLANs     []Record   `json:"vlans"`
	Addresses []PortAddr `json:"addresses"`
}

// Export renders the stored VLANs and port addresses, sorted by name.
func (b *Book) Export(ctx context.Context) (Document, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	recs, err := b.records(ctx)
	if err != nil {
		return Document{}, err
	}
	ports, err := b.portAddrs(ctx)
	if err != nil {
		return Document{}, err
	}
	d := Document{VLANs: make([]Record, 0, len(recs)), Addresses: ports}
	for _, r := range recs {
		d.VLANs = append(d.VLANs, r)
	}
	sort.Slice(d.VLANs, func(i, j int) bool { return d.VLANs[i].Name < d.VLANs[j].Name })
	if d.Addresses == nil {
		d.Addresses = []PortAddr{}
	}
	return d, nil
}

// Replace makes d the stored VLANs and port addresses in one transaction,
// after checking every entry (an invalid one is a 400 and nothing
// changes), then reconciles the kernel; it returns the reconcile's
// problems.
func (b *Book) Replace(ctx context.Context, d Document) ([]string, error) {
	names := map[string]bool{}
	for _, r := range d.VLANs {
		if err := r.link().Check(); err != nil {
			return nil, apierr.Invalid("documents", "VLAN %s: %v", r.Name, err)
		}
		if names[r.Name] {
			return nil, apierr.Invalid("documents", "VLAN %s twice", r.Name)
		}
		names[r.Name] = true
		for _, s := range append(append([]string{}, r.IPs...), r.IPs6...) {
			if _, err := netip.ParsePrefix(s); err != nil {
				return nil, apierr.Invalid("documents", "VLAN %s: address %q: %v", r.Name, s, err)
			}
		}
	}
	for _, a := range d.Addresses {
		if _, err := netip.ParsePrefix(a.CIDR); err != nil || a.Iface == "" {
			return nil, apierr.Invalid("documents", "address %q on %q is not valid", a.CIDR, a.Iface)
		}
	}
	b.mu.Lock()
	t := b.st.Txn().DeletePrefix(b.st.Key("vlans") + "/").DeletePrefix(b.st.Key("addresses") + "/")
	for _, r := range d.VLANs {
		if r.IPs == nil {
			r.IPs = []string{}
		}
		if r.IPs6 == nil {
			r.IPs6 = []string{}
		}
		t.Put(b.key(r.Name), r)
	}
	for _, a := range d.Addresses {
		p := netip.MustParsePrefix(a.CIDR)
		t.Put(b.addrKey(a.Iface, p), a)
	}
	_, err := t.Commit(ctx)
	b.cache = nil
	b.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("storing the VLANs: %w", err)
	}
	// VLANs no longer stored lose their links in the reconcile (they are
	// netcfg's); addresses of ports that are no longer stored stay, as
	// netcfg never removes a port's address it cannot prove its own.
	_, problems, err := b.Reconcile(ctx)
	return problems, err
}
