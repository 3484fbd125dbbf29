package subscribers_test

import (
	"encoding/json"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"

	"routerd.dev/proto/api"
	"routerd.dev/proto/event"
)

// TestPlanRatesReshapeEvents: POST /plans replacing a plan's rates
// publishes client.reshaped for each client of that plan, carrying the
// client and the request's origin, and none for the clients of another
// plan; a replace the shaper refuses (rolled back) publishes none.
func TestPlanRatesReshapeEvents(t *testing.T) {
	r := startRig(t)
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 20, "up_mbps": 10})
	r.do(t, "POST", "/plans", map[string]any{"name": "silver", "down_mbps": 50, "up_mbps": 20})
	var gold []string
	for i, p := range []string{"gold", "gold", "silver", "gold", "none"} {
		mac := "02:00:00:00:07:0" + string(rune('1'+i))
		if st, m := r.do(t, "POST", "/clients", map[string]any{"mac": mac, "ip": "10.50.0." + string(rune('1'+i)) + "0", "plan": p}); st != 201 {
			t.Fatalf("add %s: %d %v", mac, st, m)
		}
		if p == "gold" {
			gold = append(gold, mac)
		}
	}

	var mu sync.Mutex
	var got []event.Event
	sub, err := r.env.NC.Subscribe(event.Subject("subscribers", api.ClientReshaped), func(m *nats.Msg) {
		var ev event.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			t.Errorf("event: %v", err)
		}
		mu.Lock()
		got = append(got, ev)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := r.env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	seen := func() []event.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]event.Event(nil), got...)
	}

	if st, m := r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 30, "up_mbps": 15}); st != 200 {
		t.Fatalf("new rates: %d %v", st, m)
	}
	_, pl := r.do(t, "GET", "/plans", nil)
	if n := field(pl["plans"].([]any)[0].(map[string]any), "clients"); n != float64(len(gold)) {
		t.Fatalf("gold's clients: %v", n)
	}
	eventually(t, "one client.reshaped per client of gold", func() bool { return len(seen()) >= len(gold) })
	time.Sleep(200 * time.Millisecond) // no more than that
	evs := seen()
	var macs []string
	for _, ev := range evs {
		var c api.Client
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatal(err)
		}
		if c.Plan == nil || *c.Plan != "gold" || c.IP == "" {
			t.Errorf("event's client: %+v", c)
		}
		if ev.Caller == "" || ev.RequestID == "" {
			t.Errorf("event without the request's origin: %+v", ev)
		}
		if s, ok := r.fx.shape(c.MAC); !ok || s.DownMbps != 30 || s.UpMbps != 15 {
			t.Errorf("%s reported reshaped but shaped %+v", c.MAC, s)
		}
		macs = append(macs, c.MAC)
	}
	sort.Strings(macs)
	if d := cmp.Diff(gold, macs); d != "" {
		t.Errorf("client.reshaped for (-gold +events):\n%s", d)
	}

	// The same rates again change nothing and say nothing; the shaper
	// refusing new rates: 500, the old rates kept, no event.
	r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 30, "up_mbps": 15})
	r.fx.mu.Lock()
	r.fx.refuse["shaper"] = true
	r.fx.mu.Unlock()
	st, m := r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 40, "up_mbps": 20})
	r.fx.mu.Lock()
	r.fx.refuse["shaper"] = false
	r.fx.mu.Unlock()
	if st != 500 {
		t.Errorf("shaper refusing: %d %v", st, m)
	}
	if _, m := r.do(t, "GET", "/plans", nil); field(m["plans"].([]any)[0].(map[string]any), "down_mbps") != float64(30) {
		t.Errorf("rates not put back: %v", m)
	}
	// A shaper whose answer is lost after it applied the new rates: 503,
	// the plan back at its rates and the shaper given them again.
	r.fx.mu.Lock()
	r.fx.lateRates = true
	r.fx.mu.Unlock()
	if st, m := r.do(t, "POST", "/plans", map[string]any{"name": "gold", "down_mbps": 50, "up_mbps": 25}); st != 503 {
		t.Errorf("shaper not answering: %d %v", st, m)
	}
	if s, _ := r.fx.shape(gold[0]); s.DownMbps != 30 || s.UpMbps != 15 {
		t.Errorf("after a reshape whose answer was lost, shaped %+v, want the old rates 30/15", s)
	}
	if err := r.env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(seen()); n != 2*len(gold) {
		t.Errorf("%d client.reshaped events, want %d (none for a replace without new rates or one refused, one each for the old rates given again)", n, 2*len(gold))
	}
}
