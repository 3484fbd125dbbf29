package routing

import (
	"errors"

	"routerd.dev/shared/seal"
)

// Peer passwords are stored sealed (shared/seal: AES-256-GCM under a key
// of this host kept beside BIRD's files, seal.key, mode 0600), so etcd,
// its backups and GET /bgp never hold one in clear. Only bird.conf (mode
// 0600, which BIRD must read) has them in clear. The peer's name is the
// additional data, so a sealed password copied onto another peer does not
// open.

// seal encrypts a peer's password for storage.
func (s *Service) seal(peer, clear string) (string, error) {
	return s.key.SealText(clear, peer)
}

// open decrypts a peer's stored password.
func (s *Service) open(peer, sealed string) (string, error) {
	clear, err := s.key.OpenText(sealed, peer)
	switch {
	case errors.Is(err, seal.ErrNotSealed):
		return "", errors.New("not a sealed password")
	case errors.Is(err, seal.ErrDamaged):
		return "", errors.New("sealed password too short")
	case errors.Is(err, seal.ErrNotOpen):
		return "", errors.New("sealed password does not open with this host's key (seal.key)")
	}
	return clear, err
}
