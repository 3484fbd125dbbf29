package firewall_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"routerd.dev/proto/api"
	"routerd.dev/services/firewall"
	"routerd.dev/shared/testenv"
)

func TestSSHFailureLines(t *testing.T) {
	for line, want := range map[string]string{
		"Nov 24 16:00:00 r sshd[123]: Failed password for root from 192.0.2.2 port 50000 ssh2":                     "192.0.2.2",
		"Nov 24 16:00:00 r sshd[123]: Failed password for invalid user admin from 2001:db8::7 port 22 ssh2":        "2001:db8::7",
		"2026-11-24T16:00:00+00:00 r sshd-session[9]: Invalid user test from 198.51.100.4 port 4242":               "198.51.100.4",
		"Nov 24 16:00:00 r sshd[1]: Connection closed by authenticating user root 203.0.113.5 port 3333 [preauth]": "203.0.113.5",
		"Nov 24 16:00:00 r sshd[1]: Accepted publickey for ops from 192.0.2.9 port 1 ssh2":                         "",
		"Nov 24 16:00:00 r CRON[1]: Failed password for root from 192.0.2.10 port 1":                               "",
	} {
		a, ok := firewall.SSHFailureAddr(line)
		if got := map[bool]string{true: a.String(), false: ""}[ok]; got != want {
			t.Errorf("%q: %q, want %q", line, got, want)
		}
	}
}

// The sshd jail: failures sshd writes to its log ban the source on TCP 22
// (and only there); unban lifts it.
func TestSSHJailInKernel(t *testing.T) {
	tp := newTopo(t)
	env := testenv.Start(t)
	logf := filepath.Join(t.TempDir(), "auth.log")
	os.WriteFile(logf, []byte("Nov 24 15:00:00 r sshd[1]: Failed password for root from 192.0.2.2 port 1 ssh2\n"), 0o600)
	apiPort := echo(t, tp.router, ":0")
	echo(t, tp.router, ":22")
	start(t, env, tp.router, firewall.Deps{APIPort: apiPort, SSHLog: logf, Bans: firewall.BanConfig{MaxRetry: 3}})
	if err := dial(tp.up, routerUp+":22", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	f, _ := os.OpenFile(logf, os.O_APPEND|os.O_WRONLY, 0)
	for i := 0; i < 3; i++ {
		fmt.Fprintf(f, "Nov 24 16:00:0%d r sshd[12%d]: Failed password for root from %s port 5000%d ssh2\n", i, i, upAddr, i)
	}
	f.Close()
	var jail api.Jail
	testenv.WaitFor(t, 5*time.Second, "the sshd jail bans the upstream", func() bool {
		st, err := invoke(t, env, api.Fail2banGet, &api.None{})
		if err != nil || len(st.Jails) != 2 {
			t.Fatalf("fail2ban: %+v %v", st, err)
		}
		jail = st.Jails[1]
		return jail.Jail == "sshd" && slices.Contains(jail.BannedIPs, upAddr)
	})
	if jail.TotalBanned != 1 {
		t.Errorf("sshd jail = %+v (the line before the start must not count)", jail)
	}
	if err := dial(tp.up, routerUp+":22", 500*time.Millisecond); err == nil {
		t.Error("the banned source reached TCP 22")
	}
	if err := dial(tp.up, fmt.Sprintf("%s:%d", routerUp, apiPort), 2*time.Second); err != nil {
		t.Errorf("an sshd ban closed the API port: %v", err)
	}
	if err := dial(tp.sub, routerSub+":22", 2*time.Second); err != nil {
		t.Errorf("another source: %v", err)
	}
	if st, m := call(t, env, api.Fail2banUnbanOp, "POST", map[string]any{"unban": upAddr}); st != 200 || m["detail"] != "unbanned from sshd" {
		t.Errorf("unban: %d %v", st, m)
	}
	if err := dial(tp.up, routerUp+":22", 2*time.Second); err != nil {
		t.Errorf("after unban: %v", err)
	}
}
