module routerd.dev/integration

go 1.26.0

replace (
	routerd.dev/deploy => ../deploy
	routerd.dev/gateway => ../gateway
	routerd.dev/proto => ../proto
	routerd.dev/services/netcfg => ../services/netcfg
	routerd.dev/services/subscribers => ../services/subscribers
	routerd.dev/services/system => ../services/system
	routerd.dev/shared => ../shared
)

require (
	github.com/osrg/gobgp/v3 v3.37.0
	google.golang.org/protobuf v1.36.11
)
