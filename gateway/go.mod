module routerd.dev/gateway

go 1.26
