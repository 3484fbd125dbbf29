package driver

import (
	"sort"
	"time"
)

// Timeout limits of Document 3: a caller may ask for 10 to 300 seconds.
const (
	MinTimeout     = 10 * time.Second
	MaxTimeout     = 300 * time.Second
	DefaultTimeout = 40 * time.Second
	LongTimeout    = 180 * time.Second
)

// OpInfo describes one operation for the API layer: whether it changes the
// OLT (and so needs the write licence and the per-OLT write lock), its
// default timeout, and whether dry_run is meaningful for it.
type OpInfo struct {
	Name           string
	Write          bool
	DefaultTimeout time.Duration
	DryRun         bool
}

// ops is built by a function rather than held in a package variable so no
// caller can mutate the registry.
func ops() map[string]OpInfo {
	m := map[string]OpInfo{}
	read := func(name string, t time.Duration) { m[name] = OpInfo{Name: name, DefaultTimeout: t} }
	write := func(name string, t time.Duration, dry bool) {
		m[name] = OpInfo{Name: name, Write: true, DefaultTimeout: t, DryRun: dry}
	}
	for _, n := range []string{"info", "autofind", "onus", "vlans", "serviceports", "profiles",
		"run", "audit", "boards", "pon-ports", "port-optical", "counters", "ont-optical"} {
		read(n, DefaultTimeout)
	}
	read("config", LongTimeout)
	for _, n := range []string{"exec", "vlan-add", "vlan-del", "port-vlan", "profile-add", "profile-del",
		"ont-add", "ont-del", "ont-reboot", "ont-desc", "ntp", "sysname", "ont-activate",
		"ont-deactivate", "ont-replan"} {
		write(n, DefaultTimeout, true)
	}
	write("save", DefaultTimeout, false)
	write("plan-sync", LongTimeout, true)
	write("init", LongTimeout, true)
	return m
}

// Lookup returns the registry entry of an operation name as the API spells
// it ("ont-add", "pon-ports").
func Lookup(name string) (OpInfo, bool) {
	o, ok := ops()[name]
	return o, ok
}

// Ops lists every operation name, sorted; the API answers an unknown
// operation with this list.
func Ops() []string {
	var names []string
	for n := range ops() {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// WriteOps lists the changing operations, sorted.
func WriteOps() []string {
	var names []string
	for n, o := range ops() {
		if o.Write {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}

// EffectiveTimeout clamps a requested timeout to the 10-300 s window, and
// uses the operation's default when none was asked for.
func EffectiveTimeout(op string, requested time.Duration) time.Duration {
	if requested <= 0 {
		if o, ok := Lookup(op); ok {
			return o.DefaultTimeout
		}
		return DefaultTimeout
	}
	return min(max(requested, MinTimeout), MaxTimeout)
}
