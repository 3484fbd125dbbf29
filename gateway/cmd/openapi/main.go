// Command openapi writes the API reference generated from the operation
// table: go run ./gateway/cmd/openapi [-o docs/openapi.yaml].
package main

import (
	"flag"
	"fmt"
	"os"

	"routerd.dev/gateway/openapi"
	"routerd.dev/proto/api"
)

func main() {
	out := flag.String("o", "docs/openapi.yaml", "file to write")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "openapi:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	doc, err := openapi.Generate(api.Table)
	if err != nil {
		return err
	}
	return os.WriteFile(path, doc, 0o644)
}
