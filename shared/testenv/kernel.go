package testenv

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"routerd.dev/shared/netns"
)

// Netns makes an anonymous network namespace for a kernel test, or skips
// the test, saying why, when the process is not root.
func Netns(t testing.TB) *netns.NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("kernel test: needs root to create a network namespace")
	}
	ns, err := netns.New()
	if err != nil {
		t.Skipf("kernel test: cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() { ns.Close() })
	return ns
}

// Run runs a command inside ns (through nsenter) and returns its output;
// it fails the test when the command fails.
func Run(t testing.TB, ns *netns.NS, name string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("kernel test: nsenter not installed")
	}
	full := append([]string{"--net=" + ns.Path(), name}, args...)
	out, err := exec.Command("nsenter", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
