package client

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"net/netip"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
	"routerd.dev/shared/docobj"
	"routerd.dev/shared/store"
)

// Document is the path of the clients' configuration document.
const Document = "etc/clients.json"

// renderPage is how many clients one read of Render fetches: etcd counts
// every key from a page's start to the range's end on each read, so the
// reads of n clients visit about n*n/(2*renderPage) keys; 10,000 keeps
// that a few reads at 100,000 clients for a few megabytes held.
const renderPage = 10000

// Render writes every client, in MAC order, as etc/clients.json to w, a
// page at a time (never the whole document in memory), and returns how
// many it wrote.
func (b *Book) Render(ctx context.Context, w io.Writer) (int, error) {
	aw := docobj.NewArrayWriter(w)
	aw.Field("clients")
	n := 0
	for after := ""; ; {
		p, err := b.page(ctx, after, renderPage, "")
		if err != nil {
			return 0, err
		}
		for i := range p.Clients {
			if err := aw.Element(&p.Clients[i]); err != nil {
				return 0, err
			}
		}
		n += len(p.Clients)
		if p.Next == "" {
			return n, aw.Close()
		}
		after = p.Next
	}
}

// validHostname is the rule ^[A-Za-z0-9.-]{1,63}$, checked without a
// regular expression (an import checks 100,000 of them).
func validHostname(h string) bool {
	if len(h) < 1 || len(h) > 63 {
		return false
	}
	for i := 0; i < len(h); i++ {
		switch c := h[i]; {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

// EachInDocument reads etc/clients.json from r one client at a time and
// checks each against the rules of POST /clients that do not need the
// router's networks (those are taken as stored), that plans (a nil plans
// accepts any) has each plan named, and that no address or hostname is
// held twice; fn gets each client, normalised. A broken rule is a 400
// naming the document. Only fingerprints of the addresses seen are kept
// (8 bytes each; two different ones sharing a fingerprint, about one
// chance in 10^9 at 100,000 clients, would be refused as a duplicate).
func EachInDocument(r io.Reader, plans map[string]bool, fn func(c *api.Client) error) error {
	return eachInDocument(r, plans, true, fn)
}

// eachInDocument is EachInDocument; without unique it leaves out the
// check that no address or hostname is held twice (a second reading of a
// document checked on its first: the fingerprints of 100,000 clients'
// four unique values are a map of 400,000 entries).
func eachInDocument(r io.Reader, plans map[string]bool, unique bool, fn func(c *api.Client) error) error {
	seed := maphash.MakeSeed()
	seen := map[uint64]int{}
	i := 0
	bad := func(f string, a ...any) error {
		return apierr.Invalid("documents", "%s: client %d: %s", Document, i, fmt.Sprintf(f, a...))
	}
	err := docobj.Elements(r, map[string]func([]byte) error{"clients": func(raw []byte) error {
		var c api.Client
		if err := decodeClient(raw, &c); err != nil {
			return err
		}
		i++
		mac, err := NormalizeMAC(c.MAC)
		if err != nil {
			return bad("%v", err)
		}
		c.MAC = mac
		ip, err := netip.ParseAddr(c.IP)
		if err != nil || !ip.Is4() {
			return bad("invalid ip %q", c.IP)
		}
		c.IP = ip.String()
		if c.IPv6 != nil {
			a, ok := canon6(*c.IPv6)
			if !ok {
				return bad("invalid ipv6 %q", *c.IPv6)
			}
			c.IPv6 = &a
		}
		if !validHostname(c.Hostname) {
			return bad("invalid hostname %q", c.Hostname)
		}
		if c.Plan != nil && plans != nil && !plans[*c.Plan] {
			return bad("no plan %s", *c.Plan)
		}
		if c.Expires != nil {
			if _, ok := Deadline(*c.Expires); !ok {
				return bad("unreadable expires %q", *c.Expires)
			}
		}
		if !unique {
			return fn(&c)
		}
		for _, u := range [...]struct{ kind, v string }{{"mac", c.MAC}, {"ip", c.IP}, {"ipv6", str(c.IPv6)}, {"hostname", c.Hostname}} {
			if u.v == "" {
				continue
			}
			// The kind and the value (a hostname in lower case) hashed
			// as "kind value", without building that string.
			var mh maphash.Hash
			mh.SetSeed(seed)
			mh.WriteString(u.kind)
			mh.WriteByte(' ')
			if u.kind == "hostname" {
				for i := 0; i < len(u.v); i++ {
					b := u.v[i]
					if b >= 'A' && b <= 'Z' {
						b += 'a' - 'A'
					}
					mh.WriteByte(b)
				}
			} else {
				mh.WriteString(u.v)
			}
			h := mh.Sum64()
			if o, ok := seen[h]; ok {
				v := u.v
				if u.kind == "hostname" {
					v = strings.ToLower(v)
				}
				return bad("%s %s also held by client %d", u.kind, v, o)
			}
			seen[h] = i
		}
		return fn(&c)
	}})
	var ae *apierr.Error
	if err != nil && !errors.As(err, &ae) {
		return apierr.Invalid("documents", "%s does not parse: %v", Document, err).With("broken_data_files", []string{Document})
	}
	return err
}

// decodeClient decodes one client of the document as encoding/json
// would (unknown fields refused), without reflection when every value is
// a plain string, a boolean or null, as the document is written.
func decodeClient(raw []byte, c *api.Client) error {
	if docobj.Flat(raw, func(name, text []byte, kind byte) bool { return setClientField(c, name, text, kind) }) {
		return nil
	}
	*c = api.Client{}
	return docobj.Strict(raw, c)
}

// setClientField sets the field of c named name (its json name) as
// encoding/json would from a string, true, false or null (kind as
// docobj.Flat gives it): null leaves a string or a boolean as it is and
// clears a pointer. It reports false for a name or a kind of value the
// field does not take, for docobj.Strict to decode or refuse.
func setClientField(c *api.Client, name, text []byte, kind byte) bool {
	str := func(f *string) bool {
		switch kind {
		case '"':
			*f = string(text)
		case 'n':
		default:
			return false
		}
		return true
	}
	ptr := func(f **string) bool {
		switch kind {
		case '"':
			s := string(text)
			*f = &s
		case 'n':
			*f = nil
		default:
			return false
		}
		return true
	}
	flag := func(f *bool) bool {
		switch kind {
		case 't', 'f':
			*f = kind == 't'
		case 'n':
		default:
			return false
		}
		return true
	}
	switch string(name) {
	case "mac":
		return str(&c.MAC)
	case "ip":
		return str(&c.IP)
	case "ipv6":
		return ptr(&c.IPv6)
	case "plan":
		return ptr(&c.Plan)
	case "suspended":
		return flag(&c.Suspended)
	case "auto_suspended":
		return flag(&c.AutoSuspended)
	case "expires":
		return ptr(&c.Expires)
	case "hostname":
		return str(&c.Hostname)
	case "network":
		return ptr(&c.Network)
	case "network6":
		return ptr(&c.Network6)
	case "iface":
		return str(&c.Iface)
	case "gateway":
		return str(&c.Gateway)
	case "comment":
		return str(&c.Comment)
	case "created":
		return str(&c.Created)
	}
	return false
}

// Load stores clients (benchmarks seed a store with it) in transactions
// of up to 100 operations; a failure half way says how far it got. The effects follow
// with the next Reconcile.
func (b *Book) Load(ctx context.Context, clients []api.Client) error {
	l := b.loader(ctx)
	for i := range clients {
		if err := l.add(&clients[i]); err != nil {
			return err
		}
	}
	return l.flush()
}

// ImportDocument makes the stored clients and their index keys exactly
// those of etc/clients.json, read as a stream (open gives it afresh) and
// never held whole, writing only what differs (store.Replace). The first
// pass checks every client (EachInDocument with plans; a bad one refuses
// the document and nothing changes) and notes the keys it wants while
// the stored keys are read; when they are exactly the stored ones, that
// is all. Otherwise a second pass writes each client changed or new with
// its index keys, and the clients and index keys the document does not
// hold are deleted: transactions of up to 128 operations, several in
// flight, not one transaction (a failure half way says how far it got).
// It returns how many clients the document holds and what was written.
// The effects follow with the next Reconcile.
func (b *Book) ImportDocument(ctx context.Context, open func() (io.ReadCloser, error), plans map[string]bool) (int, store.ReplaceResult, error) {
	rp := b.d.St.Replace(ctx, b.k.clients(), b.d.St.Key("index")+"/")
	n, done := 0, 0
	res, err := rp.Sync(open, func(doc io.Reader, pass int, put func(k, v string) error) error {
		// The second pass reads the same document, checked on the first:
		// only what makes the keys and values (normalised MAC and
		// addresses) is done again.
		check, unique := plans, true
		if pass == 2 {
			check, unique = nil, false
		}
		return eachInDocument(doc, check, unique, func(c *api.Client) error {
			if put == nil { // nothing stored to compare with: a check only
				n++
				return nil
			}
			raw, err := jsonOf(c)
			if err != nil {
				return err
			}
			if err := put(b.k.client(c.MAC), raw); err != nil {
				return err
			}
			if err := b.eachIndex(c, put); err != nil {
				return err
			}
			if pass == 1 {
				n++
			} else {
				done++
			}
			return nil
		})
	}, func(err error) error {
		return apierr.Internal(err.Error(), "%s: %d of its %d clients given to the store, then it failed", Document, done, n)
	})
	return n, res, err
}

// loader writes clients and their index keys in transactions of up to
// 100 operations.
type loader struct {
	ctx  context.Context
	b    *Book
	ops  []clientv3.Op
	done int // clients stored
	held int // clients in ops
}

func (b *Book) loader(ctx context.Context) *loader { return &loader{ctx: ctx, b: b} }

func (l *loader) add(c *api.Client) error {
	raw, err := jsonOf(c)
	if err != nil {
		return err
	}
	if len(l.ops)+7 > 100 {
		if err := l.flush(); err != nil {
			return err
		}
	}
	l.ops = append(l.ops, clientv3.OpPut(l.b.k.client(c.MAC), raw))
	for k, v := range l.b.indexes(c) {
		l.ops = append(l.ops, clientv3.OpPut(k, v))
	}
	l.held++
	return nil
}

func (l *loader) flush() error {
	if len(l.ops) == 0 {
		return nil
	}
	if _, err := l.b.d.St.Client().Txn(l.ctx).Then(l.ops...).Commit(); err != nil {
		return apierr.Internal(err.Error(), "%s: %d clients stored, then the store failed", Document, l.done)
	}
	l.done += l.held
	l.ops, l.held = l.ops[:0], 0
	return nil
}
