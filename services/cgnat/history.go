package cgnat

import (
	"bufio"
	"context"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
)

// parseAt reads a past time: RFC 3339, or YYYY-MM-DD HH:MM[:SS] in UTC.
func parseAt(s string) (time.Time, bool) {
	for _, f := range []string{time.RFC3339Nano, "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.Parse(f, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// auditRecord is one line of the audit log.
type auditRecord struct {
	t           time.Time
	assign      bool
	mac, priv   string
	public      netip.Addr
	first, last int
	slot        int
	host        string
	hasHost     bool
}

func parseAudit(line string) (auditRecord, bool) {
	f := strings.Fields(line)
	if len(f) < 7 {
		return auditRecord{}, false
	}
	var r auditRecord
	var err error
	if r.t, err = time.Parse(time.RFC3339Nano, f[0]); err != nil {
		return r, false
	}
	r.assign = f[1] == "assign"
	kv := map[string]string{}
	for _, x := range f[2:] {
		k, v, _ := strings.Cut(x, "=")
		kv[k] = v
	}
	r.mac, r.priv = kv["mac"], kv["private"]
	if r.public, err = netip.ParseAddr(kv["public"]); err != nil {
		return r, false
	}
	a, b, _ := strings.Cut(kv["ports"], "-")
	r.first, _ = strconv.Atoi(a)
	r.last, _ = strconv.Atoi(b)
	r.slot, _ = strconv.Atoi(kv["slot"])
	r.host, r.hasHost = kv["host"]
	return r, true
}

// lookupAt answers who held port on pub at time at, from the audit log:
// the last record of that address and a block holding the port written
// at or before at; found when it is an assignment. A scan of the log
// (the present is answered in O(1) by Lookup).
func (s *Service) lookupAt(ctx context.Context, pub netip.Addr, port int, atText string) (*api.CGNATLookup, error) {
	at, ok := parseAt(atText)
	if !ok {
		return nil, apierr.Invalid("at", "invalid at %q: want RFC 3339 or YYYY-MM-DD HH:MM[:SS] (UTC)", atText)
	}
	p := port
	out := &api.CGNATLookup{PublicIP: pub.String(), Port: &p, At: at.UTC().Format(time.RFC3339), Source: "audit_log"}
	if s.audit.path == "" {
		return out, nil
	}
	f, err := os.Open(s.audit.path)
	if err != nil {
		return nil, apierr.Internal(err.Error(), "the audit log cannot be read")
	}
	defer f.Close()
	var last *auditRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 1<<16)
	for n := 0; sc.Scan(); n++ {
		if n%65536 == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		line := sc.Text()
		if !strings.Contains(line, " public="+pub.String()+" ") {
			continue
		}
		r, ok := parseAudit(line)
		if !ok || r.public != pub || port < r.first || port > r.last {
			continue
		}
		if r.t.After(at) {
			break // the log is in time order
		}
		last = &r
	}
	if err := sc.Err(); err != nil {
		return nil, apierr.Internal(err.Error(), "the audit log cannot be read")
	}
	if last == nil || !last.assign {
		return out, nil
	}
	ps, pe, sl := last.first, last.last, last.slot
	out.Found, out.MAC, out.PrivateIP, out.PortStart, out.PortEnd, out.Slot, out.Port = true, last.mac, last.priv, &ps, &pe, &sl, nil
	if last.hasHost {
		h := last.host
		out.Hostname = &h
	}
	return out, nil
}
