package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
)

// Document is the path of the clients' configuration document.
const Document = "etc/clients.json"

type document struct {
	Clients []api.Client `json:"clients"`
}

// Export renders every client, in MAC order, as etc/clients.json.
func (b *Book) Export(ctx context.Context) (string, int, error) {
	doc := document{Clients: []api.Client{}}
	if err := b.each(ctx, func(c *api.Client) error { doc.Clients = append(doc.Clients, *c); return nil }); err != nil {
		return "", 0, err
	}
	out, err := json.MarshalIndent(doc, "", "    ")
	if err != nil {
		return "", 0, err
	}
	return string(out) + "\n", len(doc.Clients), nil
}

var hostnameRule = regexp.MustCompile(`^[A-Za-z0-9.-]{1,63}$`)

// ParseDocument reads etc/clients.json and checks every client against the
// rules of POST /clients that do not need the router's networks (those
// are taken as stored), and that plans (a nil plans accepts any) has each
// plan named. A broken rule is a 400 naming the document.
func ParseDocument(text string, plans map[string]bool) ([]api.Client, error) {
	var doc document
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, apierr.Invalid("documents", "%s does not parse: %v", Document, err).With("broken_data_files", []string{Document})
	}
	seen := map[string]string{}
	bad := func(i int, f string, a ...any) error {
		return apierr.Invalid("documents", "%s: client %d: %s", Document, i+1, fmt.Sprintf(f, a...))
	}
	for i := range doc.Clients {
		c := &doc.Clients[i]
		mac, err := NormalizeMAC(c.MAC)
		if err != nil {
			return nil, bad(i, "%v", err)
		}
		c.MAC = mac
		ip, err := netip.ParseAddr(c.IP)
		if err != nil || !ip.Is4() {
			return nil, bad(i, "invalid ip %q", c.IP)
		}
		c.IP = ip.String()
		if c.IPv6 != nil {
			a, ok := canon6(*c.IPv6)
			if !ok {
				return nil, bad(i, "invalid ipv6 %q", *c.IPv6)
			}
			c.IPv6 = &a
		}
		if !hostnameRule.MatchString(c.Hostname) {
			return nil, bad(i, "invalid hostname %q", c.Hostname)
		}
		if c.Plan != nil && plans != nil && !plans[*c.Plan] {
			return nil, bad(i, "no plan %s", *c.Plan)
		}
		if c.Expires != nil {
			if _, ok := Deadline(*c.Expires); !ok {
				return nil, bad(i, "unreadable expires %q", *c.Expires)
			}
		}
		for _, u := range []string{"mac " + c.MAC, "ip " + c.IP, "ipv6 " + str(c.IPv6), "hostname " + strings.ToLower(c.Hostname)} {
			if strings.HasSuffix(u, " ") {
				continue
			}
			if o, ok := seen[u]; ok {
				return nil, bad(i, "%s also held by %s", u, o)
			}
			seen[u] = c.MAC
		}
	}
	return doc.Clients, nil
}

// Wipe removes every client and index key in one transaction (the
// start of an import).
func (b *Book) Wipe(ctx context.Context) error {
	_, err := b.d.St.Client().Txn(ctx).Then(
		clientv3.OpDelete(b.k.clients(), clientv3.WithPrefix()),
		clientv3.OpDelete(b.d.St.Key("index")+"/", clientv3.WithPrefix()),
	).Commit()
	return err
}

// Load stores clients (after Wipe) in transactions of up to 100
// operations; a failure half way says how far it got. The effects follow
// with the next Reconcile.
func (b *Book) Load(ctx context.Context, clients []api.Client) error {
	var ops []clientv3.Op
	done := 0
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		if _, err := b.d.St.Client().Txn(ctx).Then(ops...).Commit(); err != nil {
			return apierr.Internal(err.Error(), "%s: %d of %d clients stored, then the store failed", Document, done, len(clients))
		}
		ops = ops[:0]
		return nil
	}
	for i := range clients {
		c := &clients[i]
		raw, err := jsonOf(c)
		if err != nil {
			return err
		}
		if len(ops)+7 > 100 {
			if err := flush(); err != nil {
				return err
			}
			done = i
		}
		ops = append(ops, clientv3.OpPut(b.k.client(c.MAC), raw))
		for k, v := range b.indexes(c) {
			ops = append(ops, clientv3.OpPut(k, v))
		}
	}
	return flush()
}
