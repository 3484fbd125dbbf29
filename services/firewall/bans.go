package firewall

import (
	"context"

	"routerd.dev/services/firewall/nft"
)

// BanConfig tunes the ban engine.
type BanConfig struct{}

type banEngine struct{ s *Service }

func newBanEngine(s *Service, c BanConfig) *banEngine { return &banEngine{s: s} }

func (e *banEngine) load(ctx context.Context) error   { return nil }
func (e *banEngine) count() int                       { return 0 }
func (e *banEngine) elements() (v4, v6 []nft.Element) { return nil, nil }
func (e *banEngine) expire(ctx context.Context)       {}
