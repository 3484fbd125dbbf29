module routerd.dev/services/netcfg

go 1.26
