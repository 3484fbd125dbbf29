module routerd.dev/services/olt

go 1.26
