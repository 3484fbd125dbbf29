package graph

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// The SNMP community is stored sealed, as the routing service's BGP
// passwords and the olt service's credentials are: AES-256-GCM under a key
// of this host in the service's state directory (snmp.key, 32 random
// bytes, mode 0600, made on first use), so etcd, saved versions and
// backups hold only ciphertext. There is no shared sealing package; this
// follows services/routing/seal.go.

// SNMPKeyFile is the sealing key's name in the state directory.
const SNMPKeyFile = "snmp.key"

const (
	sealPrefix = "v1:"
	// sealAAD binds a sealed value to what it is: a sealed value copied
	// from another field or service does not open as the community.
	sealAAD = "graph:snmp:community"
)

type sealer struct {
	dir  string
	once sync.Once
	aead cipher.AEAD
	err  error
}

func (s *sealer) load() (cipher.AEAD, error) {
	s.once.Do(func() {
		if s.dir == "" {
			s.err = errors.New("graph: no state directory for the SNMP community's key")
			return
		}
		key, err := loadKey(filepath.Join(s.dir, SNMPKeyFile))
		if err != nil {
			s.err = err
			return
		}
		b, err := aes.NewCipher(key)
		if err != nil {
			s.err = err
			return
		}
		s.aead, s.err = cipher.NewGCM(b)
	})
	return s.aead, s.err
}

func loadKey(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		if len(raw) != 32 {
			return nil, fmt.Errorf("graph: %s: want a 32-byte key, have %d bytes", path, len(raw))
		}
		return raw, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("graph: key directory: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return loadKey(path) // another replica made it first
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return key, f.Close()
}

// seal encrypts the community for storage.
func (s *sealer) seal(clear string) (string, error) {
	if clear == "" {
		return "", nil
	}
	g, err := s.load()
	if err != nil {
		return "", err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return sealPrefix + base64.StdEncoding.EncodeToString(g.Seal(nonce, nonce, []byte(clear), []byte(sealAAD))), nil
}

// sealed reports whether a stored value has the sealed form.
func sealed(v string) bool { return strings.HasPrefix(v, sealPrefix) }

// open decrypts the stored community.
func (s *sealer) open(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(v, sealPrefix))
	if !sealed(v) || err != nil {
		return "", errors.New("the stored community is not sealed")
	}
	g, err := s.load()
	if err != nil {
		return "", err
	}
	if len(raw) < g.NonceSize() {
		return "", errors.New("the sealed community is too short")
	}
	clear, err := g.Open(nil, raw[:g.NonceSize()], raw[g.NonceSize():], []byte(sealAAD))
	if err != nil {
		return "", fmt.Errorf("the sealed community does not open with this router's key (%s): set it again with POST /snmp", SNMPKeyFile)
	}
	return string(clear), nil
}
