// Package embedetcd starts a single-node etcd inside the process, for the
// durability tests and the benchmark server. The platform's own etcd is
// started elsewhere; this is the smallest real etcd there is (no mock).
package embedetcd

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
)

// Server is a running embedded etcd and a client connected to it.
type Server struct {
	Etcd   *embed.Etcd
	Client *clientv3.Client
	// Endpoint is the client URL actually listened on.
	Endpoint string
}

// Options tune the embedded server.
type Options struct {
	// MaxTxnOps raises etcd's per-transaction op limit (default 128).
	MaxTxnOps uint
}

// Start runs etcd with its data in dir, listening on 127.0.0.1 with
// kernel-chosen ports, and connects a client.
func Start(dir string, o Options) (*Server, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Dir = dir
	cfg.Name = "dhcp"
	cfg.LogLevel = "error"
	cfg.Logger = "zap"
	cfg.LogOutputs = []string{filepath.Join(dir, "etcd.log")}
	lc, _ := url.Parse("http://127.0.0.1:0")
	lp, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls = []url.URL{*lc}
	cfg.AdvertiseClientUrls = []url.URL{*lc}
	cfg.ListenPeerUrls = []url.URL{*lp}
	cfg.AdvertisePeerUrls = []url.URL{*lp}
	cfg.InitialCluster = cfg.Name + "=" + lp.String()
	if o.MaxTxnOps > 0 {
		cfg.MaxTxnOps = o.MaxTxnOps
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("etcd not ready after 60s")
	}
	ep := "http://" + e.Clients[0].Addr().String()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		e.Close()
		return nil, err
	}
	return &Server{Etcd: e, Client: cli, Endpoint: ep}, nil
}

// Close stops the client and the server.
func (s *Server) Close() {
	s.Client.Close()
	s.Etcd.Close()
}
