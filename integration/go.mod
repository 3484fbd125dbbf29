module routerd.dev/integration

go 1.26
