package routing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Peer passwords are stored sealed: AES-256-GCM under a key of this host
// kept beside BIRD's files (seal.key, mode 0600), so etcd, its backups and
// GET /bgp never hold one in clear. Only bird.conf (mode 0600, which BIRD
// must read) has them in clear.

const sealPrefix = "v1:"

func loadKey(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		if len(raw) != 32 {
			return nil, fmt.Errorf("routing: %s: want a 32-byte key, have %d bytes", path, len(raw))
		}
		return raw, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
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
		return nil, err
	}
	return key, f.Close()
}

func (s *Service) aead() (cipher.AEAD, error) {
	b, err := aes.NewCipher(s.key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

// seal encrypts a peer's password for storage; the peer's name is the
// additional data, so a sealed password copied onto another peer does not
// open.
func (s *Service) seal(peer, clear string) (string, error) {
	if clear == "" {
		return "", nil
	}
	g, err := s.aead()
	if err != nil {
		return "", err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return sealPrefix + base64.StdEncoding.EncodeToString(g.Seal(nonce, nonce, []byte(clear), []byte(peer))), nil
}

// open decrypts a peer's stored password.
func (s *Service) open(peer, sealed string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, sealPrefix))
	if !strings.HasPrefix(sealed, sealPrefix) || err != nil {
		return "", errors.New("not a sealed password")
	}
	g, err := s.aead()
	if err != nil {
		return "", err
	}
	if len(raw) < g.NonceSize() {
		return "", errors.New("sealed password too short")
	}
	clear, err := g.Open(nil, raw[:g.NonceSize()], raw[g.NonceSize():], []byte(peer))
	if err != nil {
		return "", errors.New("sealed password does not open with this host's key (seal.key)")
	}
	return string(clear), nil
}
