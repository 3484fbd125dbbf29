package subscribers_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"routerd.dev/proto/api"
	pb "routerd.dev/proto/bus"
	"routerd.dev/proto/event"
	"routerd.dev/services/subscribers"
	"routerd.dev/shared/bus"
	"routerd.dev/shared/testenv"
)

func start(t *testing.T) *testenv.Env {
	t.Helper()
	env := testenv.Start(t)
	if err := bus.EnsureStream(context.Background(), env.NC); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC) }
	svc := subscribers.New(subscribers.Deps{NC: env.NC, KV: env.KV, Log: testenv.Log(t), Now: now})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { svc.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if missing := bus.WaitUp(wctx, env.NC, subscribers.Name); missing != nil {
		t.Fatal("subscribers did not register on the bus")
	}
	return env
}

func call(t *testing.T, env *testenv.Env, subject, method string, params map[string]string, body string) (int, map[string]any) {
	t.Helper()
	rep, err := bus.Call(context.Background(), env.NC, subject, &pb.Request{Method: method, Params: params, Args: json.RawMessage(body), Caller: "192.0.2.9", By: "noc"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(rep.Body, &m)
	return rep.Status, m
}

func TestPlans(t *testing.T) {
	env := start(t)
	for _, tc := range []struct {
		name, body string
		status     int
		field      string
	}{
		{"create", `{"name":"gold","down_mbps":500,"up_mbps":100,"comment":"home"}`, 201, ""},
		{"replace", `{"name":"gold","down_mbps":600,"up_mbps":100}`, 200, ""},
		{"action form strings", `{"name":"silver","down_mbps":"100","up_mbps":"20"}`, 201, ""},
		{"no name", `{"down_mbps":1,"up_mbps":1}`, 400, "name"},
		{"bad name", `{"name":"a b","down_mbps":1,"up_mbps":1}`, 400, "name"},
		{"long name", `{"name":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa","down_mbps":1,"up_mbps":1}`, 400, "name"},
		{"no down", `{"name":"x","up_mbps":1}`, 400, "down_mbps"},
		{"zero up", `{"name":"x","down_mbps":1,"up_mbps":0}`, 400, "up_mbps"},
		{"too fast", `{"name":"x","down_mbps":100001,"up_mbps":1}`, 400, "down_mbps"},
		{"not integer", `{"name":"x","down_mbps":1.5,"up_mbps":1}`, 400, "down_mbps"},
		{"text rate", `{"name":"x","down_mbps":"fast","up_mbps":1}`, 400, "down_mbps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := call(t, env, api.PlansPut.Subject(), "POST", nil, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %v", status, tc.status, m)
			}
			if tc.field != "" && m["field"] != tc.field {
				t.Errorf("field %v, want %s", m["field"], tc.field)
			}
			if status == 200 && m["message"] != "Plan updated" {
				t.Errorf("message %v", m["message"])
			}
			if status < 300 && m["olt"] != nil {
				t.Errorf("olt = %v, want null with no OLT registered", m["olt"])
			}
		})
	}

	status, m := call(t, env, api.PlansList.Subject(), "GET", nil, "{}")
	want := map[string]any{"count": float64(2), "plans": []any{
		map[string]any{"name": "gold", "down_mbps": float64(600), "up_mbps": float64(100), "comment": "", "created": "2026-11-23 10:00:00", "clients": float64(0)},
		map[string]any{"name": "silver", "down_mbps": float64(100), "up_mbps": float64(20), "comment": "", "created": "2026-11-23 10:00:00", "clients": float64(0)},
	}}
	if diff := cmp.Diff(want, m); status != 200 || diff != "" {
		t.Errorf("list (%d) (-want +got):\n%s", status, diff)
	}

	// A client on the plan blocks its deletion (the clients area writes
	// the plan's index key with the client; the check reads those keys).
	if _, err := env.KV.Put(context.Background(), "/router/subscribers/index/use/gold/10.0.0.0_24/AA:BB:CC:DD:EE:01", ""); err != nil {
		t.Fatal(err)
	}
	status, m = call(t, env, api.PlansDelete.Subject(), "DELETE", map[string]string{"name": "gold"}, "{}")
	if status != 409 || cmp.Diff([]any{"AA:BB:CC:DD:EE:01"}, m["clients"]) != "" {
		t.Fatalf("delete in use: %d %v", status, m)
	}
	// The body's name wins over the path's.
	if status, m := call(t, env, api.PlansDelete.Subject(), "DELETE", map[string]string{"name": "gold"}, `{"name":"silver"}`); status != 200 {
		t.Fatalf("delete silver: %d %v", status, m)
	}
	if status, _ := call(t, env, api.PlansDelete.Subject(), "DELETE", map[string]string{"name": "silver"}, "{}"); status != 404 {
		t.Fatalf("second delete: %d, want 404", status)
	}

	// Every change is an event a tap can replay from the stream.
	js, _ := jetstream.New(env.NC)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.OrderedConsumer(ctx, event.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{event.Subject("subscribers", ">")}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for len(kinds) < 4 {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %v: %v", kinds, err)
		}
		var ev event.Event
		_ = json.Unmarshal(msg.Data(), &ev)
		if ev.Caller != "192.0.2.9" || ev.By != "noc" {
			t.Errorf("event %s without its caller: %+v", ev.Kind, ev)
		}
		kinds = append(kinds, ev.Kind)
	}
	if diff := cmp.Diff([]string{event.PlanCreated, event.PlanUpdated, event.PlanCreated, event.PlanDeleted}, kinds); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
