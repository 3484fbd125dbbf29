package snmp

import (
	"time"
)

// OIDs of the standard groups served, and this agent's own.
var (
	SystemOID    = MustOID("1.3.6.1.2.1.1")      // SNMPv2-MIB::system
	IfNumberOID  = MustOID("1.3.6.1.2.1.2.1")    // IF-MIB::ifNumber
	IfTableOID   = MustOID("1.3.6.1.2.1.2.2")    // IF-MIB::ifTable
	SNMPGroupOID = MustOID("1.3.6.1.2.1.11")     // SNMPv2-MIB::snmp
	IfXTableOID  = MustOID("1.3.6.1.2.1.31.1.1") // IF-MIB::ifXTable

	// EnterpriseOID is enterprises.32473, the number RFC 5612 sets aside
	// for documentation and examples: the product has no Private
	// Enterprise Number of its own yet. Under it, .1 is the router
	// (sysObjectID) and .2 the subscriber-access objects.
	EnterpriseOID = MustOID("1.3.6.1.4.1.32473")
	RouterOID     = EnterpriseOID.Append(1)
	// ClientCountOID (Gauge32) is the rows of ClientTableOID.
	ClientCountOID = EnterpriseOID.Append(2, 1)
	// ClientTableOID is the per-client table (ClientColumns), indexed by
	// the client's MAC as six sub-identifiers.
	ClientTableOID = EnterpriseOID.Append(2, 2)
)

// System is the system group's text, read at each request.
type System struct {
	Descr, Contact, Name, Location string
}

// SystemGroup is SNMPv2-MIB's system group; sysUpTime counts from
// started (the agent's start).
func SystemGroup(info func() System, started time.Time, now func() time.Time) *Scalars {
	str := func(f func(System) string) func() (Value, bool) {
		return func() (Value, bool) { return Str(f(info())), true }
	}
	return NewScalars(SystemOID,
		Scalar{1, str(func(s System) string { return s.Descr })},
		Scalar{2, func() (Value, bool) { return ObjectID(RouterOID), true }},
		Scalar{3, func() (Value, bool) { return Ticks(uint64(now().Sub(started) / (10 * time.Millisecond))), true }},
		Scalar{4, str(func(s System) string { return s.Contact })},
		Scalar{5, str(func(s System) string { return s.Name })},
		Scalar{6, str(func(s System) string { return s.Location })},
		// sysServices: datalink (2) + internet (4) + end-to-end (8) +
		// applications (64), a router with services of its own.
		Scalar{7, func() (Value, bool) { return Int(78), true }},
	)
}

// SNMPGroup is the part of SNMPv2-MIB's snmp group the agent counts.
func SNMPGroup(st *Stats) *Scalars {
	c := func(n interface{ Load() uint64 }) func() (Value, bool) {
		return func() (Value, bool) { return Counter32(n.Load()), true }
	}
	return NewScalars(SNMPGroupOID,
		Scalar{1, c(&st.InPkts)},            // snmpInPkts
		Scalar{3, c(&st.BadVersions)},       // snmpInBadVersions
		Scalar{4, c(&st.BadCommunityNames)}, // snmpInBadCommunityNames
		Scalar{6, c(&st.ASNParseErrs)},      // snmpInASNParseErrs
		// snmpEnableAuthenTraps: disabled(2), the agent sends no traps.
		Scalar{30, func() (Value, bool) { return Int(2), true }},
	)
}
