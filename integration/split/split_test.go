// Package split runs the split deployment the way docker-compose.yml does:
// one external NATS and one external etcd (started by the test process),
// and separate routerd processes of the same binary, each with its own
// --services list and state directory. It proves per-service scaling: two
// replicas of a stateless service share the load and the survivor carries
// it when one is killed (scaling_test.go); a second replica of a
// kernel-owning service stands by and takes over when the holder dies
// (standby_test.go).
package split

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/shared/bus"
	"routerd.dev/shared/store"
)

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildDir  string
)

// TestMain removes the binary built when ROUTERD_BIN is not set.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// binary is $ROUTERD_BIN, or routerd built once for the package's tests.
func binary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ROUTERD_BIN"); p != "" {
		return p
	}
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "routerd-split-"); buildErr != nil {
			return
		}
		buildPath = filepath.Join(buildDir, "routerd")
		out, err := exec.Command("go", "build", "-o", buildPath, "routerd.dev/deploy/routerd").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building routerd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// cluster is the external bus and store the routerd processes of one test
// share, and the test's own connections to them.
type cluster struct {
	t       *testing.T
	bin     string
	natsURL string
	etcdURL string
	nc      *nats.Conn
	kv      *clientv3.Client
	key     string
	config  string // the routerd YAML every process loads
	procs   []*proc
}

// startCluster starts NATS (JetStream in a temporary directory, a port
// the server picks on 127.0.0.1) and etcd (a client port the kernel
// picks), and writes the routerd configuration pointing at them. netnsPath
// is the kernel services' namespace ("" for none).
func startCluster(t *testing.T, netnsPath string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: binary(t), key: randomKey()}

	// Port -1: the NATS server picks a free port itself.
	ns, err := bus.StartEmbedded(bus.EmbedConfig{StoreDir: filepath.Join(t.TempDir(), "nats"), Listen: "127.0.0.1:-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Shutdown)
	c.natsURL = ns.ClientURL()
	if c.nc, err = bus.Connect("split-test", c.natsURL, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.nc.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e, err := store.StartEmbedded(ctx, store.EmbedConfig{Dir: filepath.Join(t.TempDir(), "etcd")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	c.etcdURL = e.ClientURL
	c.kv = e.Client()
	t.Cleanup(func() { c.kv.Close() })

	// listen_port is a placeholder: the gateway is started with --listen
	// 127.0.0.1:0 and its log says which port it got.
	cfg := fmt.Sprintf(`# written by integration/split
listen_ip: 127.0.0.1
listen_port: 8880
api_key: %s
state_dir: %s
nats_url: %s
etcd_endpoints: [%s]
netns: %q
log_level: info
`, c.key, filepath.Join(t.TempDir(), "unused"), c.natsURL, c.etcdURL, netnsPath)
	c.config = filepath.Join(t.TempDir(), "routerd.yaml")
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Logf("external NATS %s, external etcd %s", c.natsURL, c.etcdURL)

	// Registered after NATS and etcd, so it runs before they stop. A
	// failing test shows what every process said.
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.kill()
		}
		if t.Failed() {
			for _, p := range c.procs {
				t.Logf("---- %s (%s) output:\n%s", p.name, p.cmd.ProcessState, p.tail(80))
			}
		}
	})
	return c
}

func randomKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// proc is one routerd process; its stdout and stderr are kept as lines.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for

	mu      sync.Mutex
	partial []byte
	lines   []string
}

// start runs `routerd --config <cfg> --services <services>` with a state
// directory of its own, plus extra arguments.
func (c *cluster) start(name, services string, extra ...string) *proc {
	c.t.Helper()
	state := filepath.Join(c.t.TempDir(), name)
	args := append([]string{"--config", c.config, "--services", services, "--state", state}, extra...)
	p := &proc{name: name, cmd: exec.Command(c.bin, args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "ROUTERD_API_KEY="+c.key)
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.procs = append(c.procs, p)
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.partial = append(p.partial, b...)
	for {
		i := bytes.IndexByte(p.partial, '\n')
		if i < 0 {
			break
		}
		p.lines = append(p.lines, string(p.partial[:i]))
		p.partial = p.partial[i+1:]
	}
	return len(b), nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits until the process is reaped; it returns how
// long that took (0 when it had already exited).
func (p *proc) kill() time.Duration {
	if p.exited() {
		return 0
	}
	start := time.Now()
	_ = p.cmd.Process.Kill()
	<-p.done
	return time.Since(start)
}

// find returns the submatches of re in the first line matching it.
func (p *proc) find(re *regexp.Regexp) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	return nil
}

// waitLog waits until a line matches re and returns its submatches; it
// fails the test when the process exits or within passes first.
func (p *proc) waitLog(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if m := p.find(re); m != nil {
			return m
		}
		if p.exited() {
			t.Fatalf("%s exited (%s) before logging %q:\n%s", p.name, p.cmd.ProcessState, re, p.tail(40))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not log %q within %v:\n%s", p.name, re, within, p.tail(40))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *proc) tail(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lines
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// instances asks every instance of a micro service to identify itself
// ($SRV.PING.<service> or $SRV.INFO.<service>): the request goes out once
// with a fresh inbox as reply subject and every answer arriving within
// gather is collected. It returns the distinct instance ids, sorted.
func instances(t *testing.T, nc *nats.Conn, verb micro.Verb, service string, gather time.Duration) []string {
	t.Helper()
	subj, err := micro.ControlSubject(verb, service, "")
	if err != nil {
		t.Fatal(err)
	}
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(subj, inbox, nil); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	deadline := time.Now().Add(gather)
	for {
		msg, err := sub.NextMsg(time.Until(deadline))
		if err != nil {
			break
		}
		var id micro.ServiceIdentity
		if err := json.Unmarshal(msg.Data, &id); err != nil || id.ID == "" || id.Name != service {
			t.Errorf("%s: unexpected answer %q", subj, msg.Data)
			continue
		}
		seen[id.ID] = true
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// waitInstances polls until exactly want instances answer, and returns
// them; it fails the test after within.
func waitInstances(t *testing.T, nc *nats.Conn, verb micro.Verb, service string, want int, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ids := instances(t, nc, verb, service, 300*time.Millisecond)
		if len(ids) == want {
			return ids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: %d instances answer after %v, want %d: %v", verb, service, len(ids), within, want, ids)
		}
	}
}
