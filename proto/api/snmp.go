package api

// SNMPOps are the SNMP agent's operations (the graph service; Document 1,
// Protection: GET and POST /snmp).
var SNMPOps = []Operation{}
