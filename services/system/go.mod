module routerd.dev/services/system

go 1.26.0

require (
	github.com/nats-io/nats.go v1.55.0
	github.com/vishvananda/netlink v1.3.1
	go.etcd.io/etcd/client/v3 v3.7.3
	routerd.dev/gateway v0.0.0
	routerd.dev/proto v0.0.0
	routerd.dev/services/netcfg v0.0.0
	routerd.dev/services/subscribers v0.0.0
	routerd.dev/shared v0.0.0
)

require (
	github.com/antithesishq/antithesis-sdk-go v0.8.0-default-no-op // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.2 // indirect
	github.com/nats-io/nats-server/v2 v2.15.2 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.16.0 // indirect
)

replace (
	routerd.dev/proto => ../../proto
	routerd.dev/shared => ../../shared
)

replace (
	routerd.dev/gateway => ../../gateway
	routerd.dev/services/netcfg => ../netcfg
	routerd.dev/services/subscribers => ../subscribers
)
