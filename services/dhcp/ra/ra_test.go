package ra

import (
	"encoding/binary"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// options returns the options of a marshalled advertisement by type.
func options(t *testing.T, b []byte) map[byte][]byte {
	t.Helper()
	out := map[byte][]byte{}
	for o := b[16:]; len(o) > 0; {
		if len(o) < 8 || o[1] == 0 || int(o[1])*8 > len(o) {
			t.Fatalf("malformed options: % x", b[16:])
		}
		n := int(o[1]) * 8
		out[o[0]] = o[:n]
		o = o[n:]
	}
	return out
}

func TestMarshalMTU(t *testing.T) {
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 1}
	cfg := Config{Prefix: netip.MustParsePrefix("2001:db8:1::/64"), RouterLifetime: 1800 * time.Second,
		Interval: 200 * time.Second, Valid: 4000 * time.Second, Preferred: 2000 * time.Second, MTU: 1492}
	mtu, ok := options(t, Marshal(cfg, mac, false))[5]
	if !ok {
		t.Fatal("MTU option missing")
	}
	if got, want := mtu, []byte{5, 1, 0, 0, 0, 0, 0x05, 0xd4}; !cmp.Equal(got, want) {
		t.Errorf("MTU option % x, want % x (RFC 4861 4.6.4: type 5, length 1, reserved, 1492)", got, want)
	}
	if got := binary.BigEndian.Uint32(mtu[4:]); got != 1492 {
		t.Errorf("MTU %d, want 1492", got)
	}
	cfg.MTU = 0
	if _, ok := options(t, Marshal(cfg, mac, false))[5]; ok {
		t.Error("MTU option sent with MTU 0")
	}
}

// The schedule answers solicitations as RFC 4861 6.2.6 says: after the
// random delay, never within MinDelayBetweenRAs of the previous multicast
// advertisement, one answer for all the solicitations that arrive while it
// is pending, and not at all when the periodic one comes first.
func TestSchedule(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	const iv = 200 * time.Second
	type step struct {
		at    time.Duration
		do    string // "rs", "update", "send"
		delay time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  time.Duration // due() after the steps, from t0
	}{
		{"quiet link: answered after the random delay", []step{{at: 10 * time.Second, do: "rs", delay: 200 * time.Millisecond}}, 10*time.Second + 200*time.Millisecond},
		{"just advertised: held until 3 s after it, plus the delay", []step{{at: time.Second, do: "rs", delay: 100 * time.Millisecond}}, 3*time.Second + 100*time.Millisecond},
		{"a burst is answered once, relative to the first", []step{
			{at: time.Second, do: "rs", delay: 400 * time.Millisecond},
			{at: 1100 * time.Millisecond, do: "rs", delay: 0},
			{at: 2900 * time.Millisecond, do: "rs", delay: 0},
		}, 3*time.Second + 400*time.Millisecond},
		{"after the answer, the next one waits 3 s again", []step{
			{at: time.Second, do: "rs", delay: 0},
			{at: 3 * time.Second, do: "send"},
			{at: 3100 * time.Millisecond, do: "rs", delay: 50 * time.Millisecond},
		}, 6*time.Second + 50*time.Millisecond},
		{"the periodic advertisement is near: it answers", []step{{at: iv - 100*time.Millisecond, do: "rs", delay: 300 * time.Millisecond}}, iv},
		{"an update goes out at once on a quiet link", []step{{at: 10 * time.Second, do: "update"}}, 10 * time.Second},
		{"an update right after an advertisement waits 3 s", []step{{at: time.Second, do: "update"}}, 3 * time.Second},
		{"an update brings a pending answer forward", []step{
			{at: 10 * time.Second, do: "rs", delay: 400 * time.Millisecond},
			{at: 10*time.Second + 100*time.Millisecond, do: "update"},
		}, 10*time.Second + 100*time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s schedule
			s.sent(t0, iv) // the advertisement at start
			for _, st := range tc.steps {
				switch st.do {
				case "rs":
					s.solicited(at(st.at), st.delay)
				case "update":
					s.updated(at(st.at))
				case "send":
					if got := s.due(); got.After(at(st.at)) {
						t.Fatalf("send at %v, but due only at %v", st.at, got.Sub(t0))
					}
					s.sent(at(st.at), iv)
				}
			}
			if got := s.due().Sub(t0); got != tc.want {
				t.Errorf("due at %v, want %v", got, tc.want)
			}
		})
	}
}

// The periodic interval is drawn between a third of the configured one and
// the configured one, and the first few are cut to 16 s (RFC 4861 6.2.4).
func TestNextInterval(t *testing.T) {
	lowest := func(time.Duration) time.Duration { return 0 }
	highest := func(d time.Duration) time.Duration { return d - 1 }
	for _, tc := range []struct {
		max  time.Duration
		n    int
		rnd  func(time.Duration) time.Duration
		want time.Duration
	}{
		{600 * time.Second, 4, lowest, 198 * time.Second},
		{600 * time.Second, 4, highest, 600 * time.Second},
		{600 * time.Second, 1, lowest, 16 * time.Second},
		{600 * time.Second, 3, highest, 16 * time.Second},
		{30 * time.Second, 2, lowest, 9900 * time.Millisecond},
		{4 * time.Second, 1, highest, 4 * time.Second}, // under 9 s: fixed
		{4 * time.Second, 9, lowest, 4 * time.Second},
	} {
		if got := nextInterval(tc.max, tc.n, tc.rnd); got != tc.want {
			t.Errorf("nextInterval(%v, %d) = %v, want %v", tc.max, tc.n, got, tc.want)
		}
	}
	for range 1000 {
		if d := nextInterval(600*time.Second, 5, rand.N[time.Duration]); d < 198*time.Second || d > 600*time.Second {
			t.Fatalf("interval %v outside [198 s, 600 s]", d)
		}
	}
}
