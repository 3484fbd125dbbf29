package shaper

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"routerd.dev/proto/api"
	"routerd.dev/shared/store"
)

// Seed stores shapes the way a restore does, with their classes allocated
// as Set would, and applies nothing: the next start's reconcile builds
// them (the full build). It is for filling a store in bulk (benchmarks,
// imports) while no shaper serves; shapes already stored are overwritten.
func Seed(ctx context.Context, kv *clientv3.Client, shapes []api.Shape) error {
	s := &Service{st: store.New(kv, Name), state: newState()}
	s.w = s.st
	recs := make([]*record, 0, len(shapes))
	for i := range shapes {
		in := &shapes[i]
		p, err := parseShape(in)
		if err != nil {
			return fmt.Errorf("%s: %w", in.ID, err)
		}
		is := s.state.ifaces[in.Iface]
		if is == nil {
			is = &ifaceS{k: &ifaceK{name: in.Iface}, bins: map[uint16]*bin{}}
			s.state.ifaces[in.Iface] = is
		}
		_, cid, _, err := is.slot()
		if err != nil {
			return err
		}
		is.claim(cid, true)
		r := &record{Shape: *in, Class: cid}
		if p.p6.IsValid() {
			r.Prefix6 = p.p6.String()
		}
		recs = append(recs, r)
	}
	return s.putRecords(ctx, recs, nil)
}
