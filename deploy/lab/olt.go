package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/services/olt"
	"routerd.dev/services/olt/sim"
	"routerd.dev/shared/licence"
)

// OLTName is the name the lab's simulated OLT is registered under.
const OLTName = "lab"

// LabONTs are the ONTs waiting in the lab OLT's autofind list on PON port
// 0/1/0.
var LabONTs = []string{"48575443A0B0C001", "48575443A0B0C002"}

// OLT is the lab's simulated OLT (a Huawei MA5800 as services/olt/sim
// models it) on a loopback port.
type OLT struct {
	Sim  *sim.Server
	Host string
	Port int
	User string
	pass string
}

// StartOLT starts the simulated OLT; it stops with ctx or Close.
func StartOLT(ctx context.Context) (*OLT, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	o := &OLT{User: "lab", pass: hex.EncodeToString(b[:])}
	var found []sim.AutofindONT
	for _, sn := range LabONTs {
		found = append(found, sim.AutofindONT{Port: "0/1/0", SN: sn})
	}
	srv, err := sim.Start(ctx, sim.Config{OLTs: []sim.OLTConfig{{Name: "LAB-OLT", User: o.User, Pass: o.pass, Autofind: found}}})
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(srv.TelnetAddr())
	o.Sim, o.Host = srv, host
	o.Port, _ = strconv.Atoi(port)
	return o, nil
}

// Close stops the simulator.
func (o *OLT) Close() error { return o.Sim.Close() }

// Register records the simulated OLT in the OLT registry as OLTName, its
// password sealed under stateDir's key like any registered OLT's.
func (o *OLT) Register(ctx context.Context, kv *clientv3.Client, stateDir string) error {
	// The lab is licensed for OLT writes (an operator's licence, when
	// one is installed, is kept).
	if _, err := licence.Read(stateDir); errors.Is(err, licence.ErrMissing) {
		if _, err := licence.Install(stateDir, []byte(`{"features": ["`+licence.OLTWrite+`"], "comment": "routerd --lab"}`+"\n")); err != nil {
			return err
		}
	}
	return olt.Register(ctx, kv, stateDir, api.OLTAdd{Name: OLTName, OLTFields: api.OLTFields{
		Host: o.Host, Port: o.Port, Protocol: "telnet", User: o.User, Pass: o.pass}})
}

// SeedWith registers the lab's OLT.
func SeedWith(o *OLT, stateDir string) func(ctx context.Context, kv *clientv3.Client) error {
	return func(ctx context.Context, kv *clientv3.Client) error {
		return o.Register(ctx, kv, stateDir)
	}
}

// Banner is the lab banner's lines about the OLT.
func (o *OLT) Banner(addr, key string) string {
	return fmt.Sprintf("  OLT:      a simulated OLT is registered as '%[3]s' (telnet %[4]s:%[5]d); ONTs wait on PON port 0/1/0\n"+
		"  Try:      curl -s -H 'X-API-Key: %[2]s' -d '{\"olt\":\"%[3]s\"}' http://%[1]s/olt/autofind\n",
		addr, key, OLTName, o.Host, o.Port)
}
