module routerd.dev/services/dhcp

go 1.26
