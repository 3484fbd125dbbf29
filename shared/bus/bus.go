// Package bus opens the message bus (an embedded NATS server or an external
// cluster), declares services on it with nats.go/micro, carries requests
// between the gateway and the services, and publishes events.
package bus

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"routerd.dev/proto/event"
)

// EmbedConfig says how the in-process NATS server runs.
type EmbedConfig struct {
	// StoreDir holds JetStream's files (the event stream).
	StoreDir string
	// Listen is host:port for processes of a split deployment; empty means
	// in-process connections only, no socket at all.
	Listen string
}

// MaxPayload is the largest message of the embedded server: room for a
// 4 MiB request body and its envelope. An external cluster needs
// max_payload set as high (deploy/ says so).
const MaxPayload = 8 << 20

// StartEmbedded starts a NATS server with JetStream inside this process.
func StartEmbedded(c EmbedConfig) (*server.Server, error) {
	opts := &server.Options{
		ServerName: "routerd",
		// A request carries a body of up to 4 MiB (the API's limit) in its
		// envelope; NATS's default 1 MiB would refuse it.
		MaxPayload: MaxPayload,
		JetStream:  true,
		StoreDir:   filepath.Clean(c.StoreDir),
		NoSigs:     true,
		NoLog:      true,
	}
	if c.Listen == "" {
		opts.DontListen = true
	} else {
		host, port, err := splitHostPort(c.Listen)
		if err != nil {
			return nil, err
		}
		opts.Host, opts.Port = host, port
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("bus: embedded nats: %w", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(30 * time.Second) {
		ns.Shutdown()
		return nil, errors.New("bus: embedded nats not ready after 30s")
	}
	return ns, nil
}

// Connect opens a connection: in-process to srv when it is not nil,
// otherwise to the cluster at url.
func Connect(name, url string, srv *server.Server) (*nats.Conn, error) {
	opts := []nats.Option{nats.Name(name), nats.MaxReconnects(-1)}
	if srv != nil {
		opts = append(opts, nats.InProcessServer(srv))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect %s: %w", name, err)
	}
	return nc, nil
}

// EnsureStream creates or updates the event stream so taps can replay
// recent events. Bounded by age and size so it never fills the disk.
func EnsureStream(ctx context.Context, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("bus: jetstream: %w", err)
	}
	// 256 MiB where the disk allows it; a small state disk (a VM's tmpfs,
	// an embedded board) gets a smaller stream rather than none.
	for _, max := range []int64{256 << 20, 64 << 20, 16 << 20} {
		_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:     event.Stream,
			Subjects: []string{event.SubjectPrefix + ".>"},
			Storage:  jetstream.FileStorage,
			MaxAge:   7 * 24 * time.Hour,
			MaxBytes: max,
			Discard:  jetstream.DiscardOld,
		})
		if err == nil || !strings.Contains(err.Error(), "insufficient storage") {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("bus: event stream: %w", err)
	}
	return nil
}

func splitHostPort(hp string) (string, int, error) {
	var host string
	var port int
	i := len(hp) - 1
	for i >= 0 && hp[i] != ':' {
		i--
	}
	if i < 0 {
		return "", 0, fmt.Errorf("bus: listen address %q: want host:port", hp)
	}
	host = hp[:i]
	if _, err := fmt.Sscanf(hp[i+1:], "%d", &port); err != nil {
		return "", 0, fmt.Errorf("bus: listen address %q: %w", hp, err)
	}
	return host, port, nil
}
