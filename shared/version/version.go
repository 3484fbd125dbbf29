// Package version is the router software version shown as router_version.
package version

// Version is date style (YYYY.MM.DD); release builds set it with
// -ldflags "-X routerd.dev/shared/version.Version=2026.11.23".
var Version = "2026.11.23-dev"
