package olt

import (
	"context"
	"log/slog"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/apierr"
)

// Register stores a registered OLT before the service runs (the lab's
// simulated OLT), its credentials sealed under stateDir's key as POST
// /olts would. An OLT of that name already registered is brought to the
// given address and credentials, the rest of its record kept.
func Register(ctx context.Context, kv *clientv3.Client, stateDir string, in api.OLTAdd) error {
	s := New(Deps{KV: kv, StateDir: stateDir, Log: slog.New(slog.DiscardHandler)})
	_, err := s.Add(ctx, &in)
	if ae, ok := err.(*apierr.Error); ok && ae.Kind == apierr.KindConflict {
		_, err = s.Set(ctx, &api.OLTSet{Name: in.Name, OLTFields: api.OLTFields{
			Host: in.Host, Port: in.Port, Protocol: in.Protocol, User: in.User, Pass: in.Pass}})
	}
	return err
}
