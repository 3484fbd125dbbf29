package olt_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"routerd.dev/proto/event"
)

// The monitor replays the OLT events from the JetStream stream: an ONT
// provisioned through the API leaves ont.added there, after the fact, with
// no credentials.
func TestONTEventsReplayFromTheStream(t *testing.T) {
	r := start(t)
	r.register(t, "lab", nil)
	envelope(t, r.do(t, "POST", "/olt/vlan-add", map[string]any{"vlan": 100}, nil), "vlan-add", 200)
	envelope(t, r.do(t, "POST", "/olt/ont-add", map[string]any{"port": simPort, "sn": simSN, "vlan": 100, "down_kbps": 20000, "up_kbps": 5000}, nil), "ont-add", 200)
	envelope(t, r.do(t, "POST", "/olt/ont-deactivate", map[string]any{"port": simPort, "ont_id": 0}, nil), "ont-deactivate", 200)

	// A consumer created afterwards, as a monitor that was away.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, _ := jetstream.New(r.env.NC)
	cons, err := js.OrderedConsumer(ctx, event.Stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{event.Subject("olt", "ont.>")}})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for len(kinds) < 2 {
		msg, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			t.Fatalf("after %v: %v", kinds, err)
		}
		if strings.Contains(string(msg.Data()), simPass) {
			t.Errorf("event holds the password: %s", msg.Data())
		}
		var ev event.Event
		_ = json.Unmarshal(msg.Data(), &ev)
		var d map[string]any
		_ = json.Unmarshal(ev.Data, &d)
		if d["olt"] != "lab" || d["port"] != simPort || d["ont_id"] != float64(0) {
			t.Errorf("%s data %v", ev.Kind, d)
		}
		kinds = append(kinds, ev.Kind)
	}
	if strings.Join(kinds, ",") != "ont.added,ont.deactivated" {
		t.Errorf("replayed %v", kinds)
	}
}
