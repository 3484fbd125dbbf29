module routerd.dev/services/system

go 1.26
