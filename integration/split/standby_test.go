package split

import (
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go/micro"

	"routerd.dev/shared/store"
	"routerd.dev/shared/testenv"
)

var (
	standingBy = regexp.MustCompile(`another replica holds the lock; standing by`)
	tookOver   = regexp.MustCompile(`took over: the lock is ours`)
)

// TestDHCPStandby runs two dhcp processes for one network namespace: the
// first holds the host lock and serves, the second stands by without
// registering on the bus. When the holder is killed with SIGKILL, the
// standby takes over within the lock's TTL.
func TestDHCPStandby(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("dhcp standby: needs root to create the network namespace the dhcp service acts in")
	}
	ns := testenv.Netns(t)
	c := startCluster(t, ns.Path())

	first := c.start("dhcp-a", "dhcp")
	holder := waitInstances(t, c.nc, micro.PingVerb, "dhcp", 1, 20*time.Second)
	second := c.start("dhcp-b", "dhcp")
	second.waitLog(t, standingBy, 20*time.Second)
	// The standby never registers: one instance answers discovery.
	if ids := instances(t, c.nc, micro.PingVerb, "dhcp", 500*time.Millisecond); len(ids) != 1 || ids[0] != holder[0] {
		t.Fatalf("with a standby, $SRV.PING.dhcp answered by %v, want only the holder %v", ids, holder)
	}

	killAt := time.Now()
	first.kill()
	limit := store.LockTTL + 5*time.Second
	var took time.Duration
	var ids []string
	for {
		ids = instances(t, c.nc, micro.PingVerb, "dhcp", 100*time.Millisecond)
		if len(ids) > 0 {
			took = time.Since(killAt)
			break
		}
		if time.Since(killAt) > limit {
			t.Fatalf("no dhcp answered discovery within %v of the holder's kill:\n%s", limit, second.tail(20))
		}
	}
	if len(ids) != 1 || ids[0] == holder[0] {
		t.Fatalf("after the holder's kill $SRV.PING.dhcp answered by %v, want one new instance (the holder was %v)", ids, holder)
	}
	if second.find(tookOver) == nil {
		t.Errorf("%s answers discovery but did not log that it took over", second.name)
	}
	if ids := instances(t, c.nc, micro.PingVerb, "dhcp", 500*time.Millisecond); len(ids) != 1 {
		t.Errorf("after the takeover $SRV.PING.dhcp answered by %v, want one instance", ids)
	}
	t.Logf("dhcp standby took over %v after the holder's kill -9 (lock TTL %v)", took.Round(time.Millisecond), store.LockTTL)
}
