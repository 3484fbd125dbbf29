package huawei_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"routerd.dev/services/olt/driver"
	"routerd.dev/services/olt/huawei"
	"routerd.dev/services/olt/sim"
)

// An OLT that stops answering mid-operation (the link up, nothing
// printed) costs the stall timeout, not the operation's whole timeout, and
// its session is not reused.
func TestStalledOLTFailsAfterTheStallTimeout(t *testing.T) {
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			r := newRig(t, proto, sim.OLTConfig{NoPaging: true}, func(c *huawei.Config) { c.StallTimeout = 300 * time.Millisecond })
			if _, err := r.drv.Boards(ctxT(t), driver.Options{}); err != nil {
				t.Fatal(err)
			}
			r.olt.StallOn("display board")
			begin := time.Now()
			_, err := r.drv.Boards(ctxT(t), driver.Options{Timeout: 30 * time.Second})
			if err == nil || !errors.Is(err, driver.ErrTimeout) || !strings.Contains(err.Error(), "sent nothing for 300ms") {
				t.Fatalf("err %v", err)
			}
			if d := time.Since(begin); d > 5*time.Second {
				t.Errorf("took %v with a 300 ms stall timeout", d)
			}
			// The next call works on a fresh session.
			if _, err := r.drv.Boards(ctxT(t), driver.Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// save may keep an OLT silent for longer than the stall timeout while it
// writes its flash: it is bounded by its own timeout, the other
// operations are not.
func TestSaveOutlastsTheStallTimeout(t *testing.T) {
	r := newRig(t, "telnet", sim.OLTConfig{NoPaging: true}, func(c *huawei.Config) { c.StallTimeout = 200 * time.Millisecond })
	if _, err := r.drv.Boards(ctxT(t), driver.Options{}); err != nil {
		t.Fatal(err)
	}
	r.olt.SetLatency(500 * time.Millisecond)
	if _, err := r.drv.Save(ctxT(t), driver.Options{}); err != nil {
		t.Fatalf("save with a silent OLT: %v", err)
	}
	if _, err := r.drv.Boards(ctxT(t), driver.Options{}); err == nil || !strings.Contains(err.Error(), "sent nothing for 200ms") {
		t.Fatalf("boards with a 500 ms silence and a 200 ms stall timeout: %v", err)
	}
}
