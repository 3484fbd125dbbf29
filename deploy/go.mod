module routerd.dev/deploy

go 1.26
