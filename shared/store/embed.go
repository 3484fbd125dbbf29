package store

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3client"
	"go.uber.org/zap"
)

// EmbedConfig says where an embedded etcd keeps its data and listens.
type EmbedConfig struct {
	// Dir holds the member's data, e.g. /var/lib/routerd/etcd.
	Dir string
	// ClientAddr is host:port for clients of a split deployment; empty
	// lets the kernel pick a loopback port (in-process clients need none).
	ClientAddr string
	// PeerAddr is host:port for cluster peers; empty lets the kernel pick
	// a loopback port.
	PeerAddr string
	// MaxTxnOps sets etcd's limit of operations per transaction for
	// writers that batch, such as the DHCP lease committer; 0 is
	// EmbeddedTxnOps (etcd's own default is 128). A Replace of this
	// process writes in transactions of up to the smaller of the two.
	MaxTxnOps uint
}

// Embedded is a running single-member etcd inside this process.
type Embedded struct {
	etcd *embed.Etcd
	// ClientURL is where external clients reach it: the address actually
	// listened on, also when the port was chosen by the kernel.
	ClientURL string
}

// StartEmbedded starts a single-member etcd and waits until it serves.
func StartEmbedded(ctx context.Context, c EmbedConfig) (*Embedded, error) {
	cfg := embed.NewConfig()
	cfg.Name = "routerd"
	cfg.Dir = c.Dir
	cfg.WalDir = filepath.Join(c.Dir, "wal")
	// etcd logs through zap at a volume that drowns routerd's own log
	// (and every test's output); its failures surface as errors here.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// One member on one host. etcd keeps every raft entry since its last
	// snapshot in memory, plus SnapshotCatchUpEntries for followers this
	// member never has: a restore of 100,000 clients wrote 600,000 keys (now 500,000),
	// which in transactions of 100 operations at a snapshot every 10,000
	// all stayed in the heap. A snapshot every 1,000 entries and 100 kept
	// bound that to about 140,000 operations; with transactions of up to
	// EmbeddedTxnOps the same count held 8 times as much (the restore's
	// peak live heap 150 -> 272 MB), so the entries kept are counted in
	// transactions of that size: a snapshot every 125, 12 kept.
	cfg.SnapshotCount = 125
	cfg.SnapshotCatchUpEntries = 12
	cfg.AutoCompactionMode = "revision"
	cfg.AutoCompactionRetention = "10000"
	cfg.MaxTxnOps = EmbeddedTxnOps
	if c.MaxTxnOps > 0 {
		cfg.MaxTxnOps = c.MaxTxnOps
	}
	cu := url.URL{Scheme: "http", Host: orLoopback(c.ClientAddr)}
	pu := url.URL{Scheme: "http", Host: orLoopback(c.PeerAddr)}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("store: start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("store: embedded etcd: %w", err)
	case <-time.After(60 * time.Second):
		e.Close()
		return nil, fmt.Errorf("store: embedded etcd not ready after 60s")
	case <-ctx.Done():
		e.Close()
		return nil, ctx.Err()
	}
	// This process's stores talk to this member: bulk writes may use its
	// limit (never more than EmbeddedTxnOps).
	txnOps.Store(int64(min(cfg.MaxTxnOps, EmbeddedTxnOps)))
	return &Embedded{etcd: e, ClientURL: "http://" + e.Clients[0].Addr().String()}, nil
}

// Client returns an in-process client: no sockets, no serialisation cost
// beyond the gRPC adapter.
func (e *Embedded) Client() *clientv3.Client { return v3client.New(e.etcd.Server) }

// Close stops the member.
func (e *Embedded) Close() { e.etcd.Close() }

// Dial connects to an external etcd cluster.
func Dial(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("store: dial etcd %v: %w", endpoints, err)
	}
	return cli, nil
}

// orLoopback is addr, or a loopback address whose port the kernel picks.
func orLoopback(addr string) string {
	if addr == "" {
		return "127.0.0.1:0"
	}
	return addr
}
