package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// A request or an answer too large for one NATS message (a restore's
// configuration documents at 100,000 subscribers, an export of them)
// travels through the JetStream object store instead: the sender puts the
// body there and sends an empty message whose SpillHeader names the
// object; the receiver takes it and deletes it. Small messages, nearly all
// of them, are sent as before. The object store chunks what it stores, so
// no message on the bus exceeds its payload limit, whatever the size.
const (
	SpillHeader = "Router-Spill"
	// SpillBucket holds bodies in transit; an object whose receiver died
	// expires with the bucket's TTL.
	SpillBucket = "ROUTER_SPILL"
	spillTTL    = 10 * time.Minute
)

// spillAt is the size from which a body is spilled: what NATS would
// refuse, less room for the headers.
func spillAt(nc *nats.Conn) int {
	return int(nc.MaxPayload()) - 16<<10
}

func spillStore(ctx context.Context, nc *nats.Conn) (jetstream.ObjectStore, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	return js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket: SpillBucket, Description: "request and answer bodies too large for one bus message",
		TTL: spillTTL, Storage: jetstream.FileStorage,
	})
}

// spill stores data and returns the object's name.
func spill(ctx context.Context, nc *nats.Conn, data []byte) (string, error) {
	obs, err := spillStore(ctx, nc)
	if err != nil {
		return "", fmt.Errorf("bus: spilling %d bytes: %w", len(data), err)
	}
	name := nuid.Next()
	if _, err := obs.PutBytes(ctx, name, data); err != nil {
		return "", fmt.Errorf("bus: spilling %d bytes: %w", len(data), err)
	}
	return name, nil
}

// unspill takes a spilled body back and deletes its object.
func unspill(ctx context.Context, nc *nats.Conn, name string) ([]byte, error) {
	obs, err := spillStore(ctx, nc)
	if err != nil {
		return nil, fmt.Errorf("bus: reading spilled body %s: %w", name, err)
	}
	data, err := obs.GetBytes(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("bus: reading spilled body %s: %w", name, err)
	}
	_ = obs.Delete(context.WithoutCancel(ctx), name)
	return data, nil
}
