module routerd.dev/services/subscribers

go 1.26
