package driver

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRegistryMatchesTheSpec(t *testing.T) {
	// The ops and write_ops lists of Document 3, sorted.
	wantOps := []string{"audit", "autofind", "boards", "config", "counters", "exec", "info", "init", "ntp", "ont-activate",
		"ont-add", "ont-deactivate", "ont-del", "ont-desc", "ont-optical", "ont-reboot", "ont-replan", "onus", "plan-sync",
		"pon-ports", "port-optical", "port-vlan", "profile-add", "profile-del", "profiles", "run", "save", "serviceports",
		"sysname", "vlan-add", "vlan-del", "vlans"}
	if diff := cmp.Diff(wantOps, Ops()); diff != "" {
		t.Errorf("Ops (-want +got):\n%s", diff)
	}
	wantWrite := []string{"exec", "init", "ntp", "ont-activate", "ont-add", "ont-deactivate", "ont-del", "ont-desc",
		"ont-reboot", "ont-replan", "plan-sync", "port-vlan", "profile-add", "profile-del", "save", "sysname", "vlan-add", "vlan-del"}
	if diff := cmp.Diff(wantWrite, WriteOps()); diff != "" {
		t.Errorf("WriteOps (-want +got):\n%s", diff)
	}
}

func TestEffectiveTimeout(t *testing.T) {
	for _, c := range []struct {
		op   string
		req  time.Duration
		want time.Duration
	}{
		{"info", 0, 40 * time.Second},
		{"config", 0, 180 * time.Second},
		{"plan-sync", 0, 180 * time.Second},
		{"init", 0, 180 * time.Second},
		{"ont-add", 5 * time.Second, 10 * time.Second},
		{"ont-add", 20 * time.Second, 20 * time.Second},
		{"config", time.Hour, 300 * time.Second},
	} {
		if got := EffectiveTimeout(c.op, c.req); got != c.want {
			t.Errorf("EffectiveTimeout(%s, %v) = %v, want %v", c.op, c.req, got, c.want)
		}
	}
}

func TestCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 200},
		{&Error{Op: "info", Err: &LoginError{Host: "h", Reason: "bad"}}, 401},
		{&Error{Op: "info", Err: &CommandError{Command: "x", Text: "Failure: y"}}, 502},
		{fmt.Errorf("wrapped: %w", ErrTimeout), 502},
		{errors.New("other"), 502},
	} {
		if got := Code(c.err); got != c.want {
			t.Errorf("Code(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
