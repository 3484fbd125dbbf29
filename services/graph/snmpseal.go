package graph

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"routerd.dev/shared/seal"
)

// The SNMP community is stored sealed, as the routing service's BGP
// passwords and the olt service's credentials are (shared/seal: AES-256-GCM
// under a key of this host in the service's state directory, snmp.key,
// made on first use), so etcd, saved versions and backups hold only
// ciphertext.

// SNMPKeyFile is the sealing key's name in the state directory.
const SNMPKeyFile = "snmp.key"

// sealAAD binds a sealed value to what it is: a sealed value copied from
// another field or service does not open as the community.
const sealAAD = "graph:snmp:community"

// sealer seals the community under the key in dir (set before first use).
type sealer struct {
	dir  string
	once sync.Once
	key  *seal.Key
}

func (s *sealer) load() (*seal.Key, error) {
	s.once.Do(func() {
		if s.dir != "" {
			s.key = seal.New(filepath.Join(s.dir, SNMPKeyFile))
		}
	})
	if s.key == nil {
		return nil, errors.New("graph: no state directory for the SNMP community's key")
	}
	return s.key, nil
}

// seal encrypts the community for storage.
func (s *sealer) seal(clear string) (string, error) {
	k, err := s.load()
	if err != nil {
		return "", err
	}
	return k.SealText(clear, sealAAD)
}

// sealed reports whether a stored value has the sealed form.
func sealed(v string) bool { return seal.IsText(v) }

// open decrypts the stored community.
func (s *sealer) open(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	k, err := s.load()
	if err != nil {
		return "", err
	}
	clear, err := k.OpenText(v, sealAAD)
	switch {
	case errors.Is(err, seal.ErrNotSealed):
		return "", errors.New("the stored community is not sealed")
	case errors.Is(err, seal.ErrDamaged):
		return "", errors.New("the sealed community is too short")
	case errors.Is(err, seal.ErrNotOpen):
		return "", fmt.Errorf("the sealed community does not open with this router's key (%s): set it again with POST /snmp", SNMPKeyFile)
	}
	return clear, err
}
