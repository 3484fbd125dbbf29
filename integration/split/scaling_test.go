package split

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
)

// Load shape: bounded workers, time and requests.
const (
	workers     = 8
	loadFor     = 7 * time.Second
	killAfter   = 3 * time.Second // into the load
	maxRequests = 30000
	// keepEvery: every keepEvery-th plan a worker creates is never deleted,
	// so the consistency check has plans that must still be there.
	keepEvery = 10
	// grace is how long after the kill a request may still be routed to
	// the dead replica (the NATS server noticing the closed connection).
	grace = 100 * time.Millisecond
	// margin is how much past an operation's timeout an answer may come
	// (scheduling, the gateway's own work).
	margin = 3 * time.Second
)

var apiListening = regexp.MustCompile(`msg="API listening".*\baddr=(\S+)`)

// rec is one request of the load and its answer.
type rec struct {
	worker int
	op     string // create, delete, list
	name   string // the plan created or deleted
	n      int    // the worker's plan number
	sent   time.Time
	took   time.Duration
	status int // 0: no HTTP answer (err says why)
	err    error
	reqID  string
	body   []byte // changes: the whole answer; lists: the first 512 bytes
	bad    string // a 200 list whose body is not a whole plan list
}

func (r *rec) ok() bool {
	switch r.op {
	case "create":
		return r.status == http.StatusCreated
	default:
		return r.status == http.StatusOK
	}
}

func (r *rec) String() string {
	s := fmt.Sprintf("w%d %s sent %s took %v: %d", r.worker, strings.TrimSpace(r.op+" "+r.name), r.sent.Format("15:04:05.000"), r.took.Round(time.Millisecond), r.status)
	if r.err != nil {
		s += " error " + r.err.Error()
	}
	if r.reqID != "" {
		s += " request_id " + r.reqID
	}
	if len(r.body) > 0 && !r.ok() {
		var b bytes.Buffer
		if json.Compact(&b, r.body) != nil {
			b.Reset()
			b.Write(bytes.TrimSpace(r.body))
		}
		s += " " + b.String()
	}
	if r.bad != "" {
		s += " bad list: " + r.bad
	}
	return s
}

// planFor is what worker w sends for its n-th plan.
func planFor(w, n int) api.PlanPut {
	return api.PlanPut{
		Name:     fmt.Sprintf("w%d-%d", w, n),
		DownMbps: int64(1 + (w*1000+n)%100000),
		UpMbps:   int64(1 + n%1000),
		Comment:  fmt.Sprintf("split scaling test, worker %d plan %d", w, n),
	}
}

type client struct {
	url, key string
	hc       *http.Client
}

func (c *client) do(r *rec, method, path string, body any) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, c.url+path, rd)
	if err != nil {
		r.err = err
		return
	}
	req.Header.Set("X-API-Key", c.key)
	r.sent = time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		r.took, r.err = time.Since(r.sent), err
		return
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	r.took, r.status, r.err = time.Since(r.sent), resp.StatusCode, err
	r.reqID = resp.Header.Get("X-Request-Id")
	r.body = raw
	if r.op == "list" && r.status == http.StatusOK {
		r.bad = checkList(raw)
		if len(r.body) > 512 {
			r.body = r.body[:512]
		}
	}
}

// checkList says what is wrong with a GET /plans answer, "" when nothing.
func checkList(raw []byte) string {
	var l api.PlanList
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return err.Error()
	}
	if l.Count != len(l.Plans) {
		return fmt.Sprintf("count %d, %d plans", l.Count, len(l.Plans))
	}
	for _, p := range l.Plans {
		var w, n int
		if _, err := fmt.Sscanf(p.Name, "w%d-%d", &w, &n); err != nil {
			return "unexpected plan " + p.Name
		}
		if msg := checkPlan(p.Plan, planFor(w, n)); msg != "" {
			return msg
		}
	}
	return ""
}

// checkPlan says how a stored or listed plan differs from what was sent.
func checkPlan(p api.Plan, want api.PlanPut) string {
	if p.Name != want.Name || p.DownMbps != want.DownMbps || p.UpMbps != want.UpMbps || p.Comment != want.Comment {
		return fmt.Sprintf("plan %+v, sent %+v", p, want)
	}
	if _, err := time.Parse("2006-01-02 15:04:05", p.Created); err != nil {
		return fmt.Sprintf("plan %s: created %q: %v", p.Name, p.Created, err)
	}
	return ""
}

// TestSubscribersReplicas runs the gateway, system and two subscribers
// replicas as separate processes, drives plan changes and reads through
// the gateway, kills one replica with SIGKILL in the middle and checks
// that reads never fail, that the survivor answers everything sent after
// the kill, that a change lost with the dead replica is answered 503 in
// bounded time, and that etcd holds exactly what the answers said.
func TestSubscribersReplicas(t *testing.T) {
	t.Parallel()
	c := startCluster(t, "")
	gw := c.start("gateway", "gateway", "--listen", "127.0.0.1:0")
	c.start("system", "system")
	subs := []*proc{c.start("subscribers-a", "subscribers"), c.start("subscribers-b", "subscribers")}

	addr := gw.waitLog(t, apiListening, 20*time.Second)[1]
	cl := &client{url: "http://" + addr, key: c.key, hc: &http.Client{
		// An answer later than this is a hang (op timeout + margin).
		Timeout:   api.PlansPut.TimeoutOrDefault() + margin,
		Transport: &http.Transport{MaxIdleConnsPerHost: 2 * workers, DisableCompression: true},
	}}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var r rec
		cl.do(&r, "GET", "/plans", nil)
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /plans never answered 200: %s", &r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var st rec
	if cl.do(&st, "GET", "/status", nil); st.status != http.StatusOK {
		t.Errorf("GET /status through the split deployment: %s", &st)
	}
	ids := waitInstances(t, c.nc, micro.InfoVerb, "subscribers", 2, 20*time.Second)
	t.Logf("API on %s; subscribers replicas %v", addr, ids)

	// The load.
	var (
		count  atomic.Int64
		wg     sync.WaitGroup
		perW   = make([][]rec, workers)
		start  = time.Now()
		stopAt = start.Add(loadFor)
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, pending := 0, ""
			for i := 0; time.Now().Before(stopAt) && count.Add(1) <= maxRequests; i++ {
				r := rec{worker: w, op: "list"}
				switch {
				case i%3 == 0:
					n++
					p := planFor(w, n)
					r.op, r.name, r.n = "create", p.Name, n
					cl.do(&r, "POST", "/plans", p)
					if r.status == http.StatusCreated && n%keepEvery != 0 {
						pending = p.Name
					}
				case i%3 == 2 && pending != "":
					r.op, r.name = "delete", pending
					fmt.Sscanf(pending, "w%d-%d", new(int), &r.n)
					cl.do(&r, "DELETE", "/plans/"+pending, nil)
					pending = ""
				default:
					cl.do(&r, "GET", "/plans", nil)
				}
				perW[w] = append(perW[w], r)
			}
		}()
	}

	// Both replicas are listed while they live, under load.
	time.Sleep(killAfter / 3)
	if live := instances(t, c.nc, micro.InfoVerb, "subscribers", 500*time.Millisecond); !slices.Equal(live, ids) {
		t.Errorf("under load, $SRV.INFO.subscribers lists %v, want both replicas %v", live, ids)
	}
	time.Sleep(time.Until(start.Add(killAfter)))
	victim := subs[0]
	killAt := time.Now()
	reaped := victim.kill()
	afterKill := instances(t, c.nc, micro.InfoVerb, "subscribers", 500*time.Millisecond)
	wg.Wait()

	var recs []rec
	for _, rs := range perW {
		recs = append(recs, rs...)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].sent.Before(recs[j].sent) })
	var loadEnd time.Time
	for i := range recs {
		if e := recs[i].sent.Add(recs[i].took); e.After(loadEnd) {
			loadEnd = e
		}
	}

	// The assertions, request by request.
	attempt := api.PlansList.AttemptOrDefault()
	changeLimit := api.PlansPut.TimeoutOrDefault() + margin
	statuses := map[string]map[int]int{}
	var (
		sentAfter       int
		maxAfterLatency time.Duration
		maxAfterGrace   time.Duration
		lastDead        *rec // the latest-sent request routed to the dead replica
		inflightChanges []rec
		inflightReads   []rec
		failures        []string
	)
	fail := func(what string, r *rec) {
		failures = append(failures, what+": "+r.String())
	}
	for i := range recs {
		r := &recs[i]
		if statuses[r.op] == nil {
			statuses[r.op] = map[int]int{}
		}
		statuses[r.op][r.status]++
		sinceKill := r.sent.Sub(killAt)
		answered := r.sent.Add(r.took)
		deadRouted := (r.op != "list" && r.status == http.StatusServiceUnavailable) || (r.op == "list" && r.took >= attempt)
		if deadRouted && (lastDead == nil || r.sent.After(lastDead.sent)) {
			lastDead = r
		}
		// Routed to the replica that died: in flight at the kill, or sent
		// before the NATS server noticed the closed connection.
		if deadRouted && answered.After(killAt) {
			if r.op == "list" {
				inflightReads = append(inflightReads, *r)
			} else {
				inflightChanges = append(inflightChanges, *r)
			}
		}
		// (a) reads never fail, and what they list is whole.
		if r.op == "list" && (r.status != http.StatusOK || r.bad != "") {
			fail("(a) a read failed", r)
		}
		// (b) sent after the kill (and the grace): answered by the
		// survivor, at once.
		if sinceKill >= 0 {
			sentAfter++
			maxAfterLatency = max(maxAfterLatency, r.took)
		}
		if sinceKill >= grace {
			maxAfterGrace = max(maxAfterGrace, r.took)
		}
		if sinceKill >= grace && (!r.ok() || r.took >= attempt) {
			fail(fmt.Sprintf("(b) sent %v after the kill, not answered at once by the survivor", sinceKill.Round(time.Millisecond)), r)
		}
		// (c) a change is answered, success or 503, within its timeout.
		if r.op != "list" {
			if !r.ok() && r.status != http.StatusServiceUnavailable {
				fail("(c) a change got neither success nor 503", r)
			}
			if r.took > changeLimit {
				fail(fmt.Sprintf("(c) a change took longer than %v", changeLimit), r)
			}
		}
	}

	// (d) etcd holds exactly what the answers said.
	type fate struct {
		create, del int // statuses; 0: not sent
	}
	fates := map[string]*fate{}
	for i := range recs {
		r := &recs[i]
		if r.op == "list" {
			continue
		}
		f := fates[r.name]
		if f == nil {
			f = &fate{}
			fates[r.name] = f
		}
		if r.op == "create" {
			f.create = r.status
		} else {
			f.del = r.status
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const prefix = "/router/subscribers/plans/"
	resp, err := c.kv.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]bool{}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), prefix)
		stored[name] = true
		var w, n int
		if _, err := fmt.Sscanf(name, "w%d-%d", &w, &n); err != nil || fates[name] == nil {
			failures = append(failures, fmt.Sprintf("(d) %s stored but never created: %s", kv.Key, kv.Value))
			continue
		}
		var p api.Plan
		dec := json.NewDecoder(bytes.NewReader(kv.Value))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			failures = append(failures, fmt.Sprintf("(d) %s is not a whole plan (%v): %s", kv.Key, err, kv.Value))
		} else if msg := checkPlan(p, planFor(w, n)); msg != "" {
			failures = append(failures, fmt.Sprintf("(d) %s: %s", kv.Key, msg))
		}
	}
	// Changes answered 503: applied (wholly) or not at all.
	var create503Applied, create503Not, delete503Applied, delete503Not int
	for name, f := range fates {
		switch {
		case f.create == http.StatusCreated && f.del == 0 && !stored[name]:
			failures = append(failures, fmt.Sprintf("(d) %s: created (201), never deleted, but not stored", name))
		case f.del == http.StatusOK && stored[name]:
			failures = append(failures, fmt.Sprintf("(d) %s: deleted (200) but still stored", name))
		case f.create == http.StatusServiceUnavailable && stored[name]:
			create503Applied++ // and whole: checked above
		case f.create == http.StatusServiceUnavailable:
			create503Not++
		case f.del == http.StatusServiceUnavailable && stored[name]:
			delete503Not++ // and whole: checked above
		case f.del == http.StatusServiceUnavailable:
			delete503Applied++
		}
	}
	// The survivor lists exactly what etcd holds.
	var l api.PlanList
	if err := getJSON(cl, "/plans", &l); err != nil {
		failures = append(failures, "GET /plans after the load: "+err.Error())
	} else {
		var listed, want []string
		for _, p := range l.Plans {
			listed = append(listed, p.Name)
		}
		for n := range stored {
			want = append(want, n)
		}
		sort.Strings(listed)
		sort.Strings(want)
		if !slices.Equal(listed, want) {
			failures = append(failures, fmt.Sprintf("GET /plans after the load lists %d plans, etcd holds %d", len(listed), len(want)))
		}
	}

	left := instances(t, c.nc, micro.InfoVerb, "subscribers", 500*time.Millisecond)
	if len(left) != 1 || !slices.Contains(ids, left[0]) {
		failures = append(failures, fmt.Sprintf("after the kill $SRV.INFO.subscribers lists %v, want one of %v", left, ids))
	}

	// The numbers.
	t.Logf("load: %d workers sent %d requests in a %v window (kill -9 at +%v); the last answer came at +%v",
		workers, len(recs), loadFor, killAfter, loadEnd.Sub(start).Round(time.Millisecond))
	for _, op := range []string{"create", "delete", "list"} {
		t.Logf("  %-6s answered per status: %v", op, statuses[op])
	}
	t.Logf("kill -9 of %s: reaped %v after SIGKILL; $SRV.INFO.subscribers right after: %d instance(s)", victim.name, reaped.Round(time.Microsecond), len(afterKill))
	t.Logf("sent after the kill: %d requests, slowest answered in %v (%v for those sent after the %v grace)",
		sentAfter, maxAfterLatency.Round(time.Millisecond), maxAfterGrace.Round(time.Millisecond), grace)
	if lastDead != nil {
		if d := lastDead.sent.Sub(killAt); d < 0 {
			t.Logf("grace needed: none; the latest request routed to the dead replica was sent %v before the kill (%s)",
				(-d).Round(time.Microsecond), strings.TrimSpace(lastDead.op+" "+lastDead.name))
		} else {
			t.Logf("grace needed: %v; the latest request routed to the dead replica was sent %v after the kill (%s; grace allowed %v)",
				d.Round(time.Microsecond), d.Round(time.Microsecond), strings.TrimSpace(lastDead.op+" "+lastDead.name), grace)
		}
	} else {
		t.Logf("no request was routed to the dead replica")
	}
	var maxChange time.Duration
	for i := range inflightChanges {
		r := &inflightChanges[i]
		maxChange = max(maxChange, r.took)
		inEtcd := "not applied in etcd"
		if (r.op == "create") == stored[r.name] {
			inEtcd = "applied in etcd"
		}
		logged := "no outcome in its log"
		if r.reqID != "" && victim.find(regexp.MustCompile(`msg=change .*request_id=`+r.reqID)) != nil {
			logged = "logged as done by it"
		}
		t.Logf("change routed to the killed replica (%s, %s): %s", inEtcd, logged, r)
	}
	for i := range inflightReads {
		t.Logf("read routed to the killed replica (asked again after %v): %s", attempt, &inflightReads[i])
	}
	if len(inflightChanges) > 0 {
		t.Logf("in-flight change: max latency %v (op timeout %v)", maxChange.Round(time.Millisecond), api.PlansPut.TimeoutOrDefault())
	} else {
		t.Logf("no change happened to be in flight on the killed replica this run")
	}
	t.Logf("etcd: %d plans stored, all whole; creates answered 503: %d applied, %d not; deletes answered 503: %d applied, %d not",
		len(stored), create503Applied, create503Not, delete503Applied, delete503Not)

	for _, f := range failures {
		t.Error(f)
	}
	for _, p := range c.procs {
		if p != victim && p.exited() {
			t.Errorf("%s exited during the test (%s)", p.name, p.cmd.ProcessState)
		}
	}
}

func getJSON(cl *client, path string, v any) error {
	req, _ := http.NewRequest("GET", cl.url+path, nil)
	req.Header.Set("X-API-Key", cl.key)
	resp, err := cl.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
