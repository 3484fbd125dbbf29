package olt

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// KeyFile is the name of the sealing key in the state directory: 32
// random bytes, mode 0600, created on first use. It is never stored in
// etcd: a copy of etcd (a backup, a snapshot) holds only ciphertext.
// Replicas of the olt service on other hosts need the same file.
const KeyFile = "olt-credentials.key"

// credentials are what is sealed for a registered OLT.
type credentials struct {
	User string `json:"user"`
	Pass string `json:"pass"`
}

// sealer seals credentials with AES-256-GCM under the key file; the OLT's
// name is the additional data, so a sealed blob copied onto another
// record does not open.
type sealer struct {
	path string
	once sync.Once
	aead cipher.AEAD
	err  error
}

func (s *sealer) load() (cipher.AEAD, error) {
	s.once.Do(func() {
		key, err := readOrCreateKey(s.path)
		if err != nil {
			s.err = err
			return
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			s.err = err
			return
		}
		s.aead, s.err = cipher.NewGCM(block)
	})
	return s.aead, s.err
}

func readOrCreateKey(path string) ([]byte, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("olt: key directory: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case err == nil:
		_, werr := f.Write(key)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("olt: write key: %w", werr)
		}
		return key, nil
	case errors.Is(err, fs.ErrExist):
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("olt: read key: %w", err)
		}
		if len(b) != 32 {
			return nil, fmt.Errorf("olt: key file %s holds %d bytes, want 32", path, len(b))
		}
		return b, nil
	default:
		return nil, fmt.Errorf("olt: create key: %w", err)
	}
}

func (s *sealer) seal(name string, c credentials) (string, error) {
	aead, err := s.load()
	if err != nil {
		return "", err
	}
	plain, _ := json.Marshal(c)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := aead.Seal(nonce, nonce, plain, []byte("olt:"+name))
	return base64.StdEncoding.EncodeToString(out), nil
}

func (s *sealer) open(name, sealed string) (credentials, error) {
	var c credentials
	aead, err := s.load()
	if err != nil {
		return c, err
	}
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(raw) < aead.NonceSize() {
		return c, errors.New("sealed credentials are damaged")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte("olt:"+name))
	if err != nil {
		return c, errors.New("sealed credentials do not open with this router's key (was the key file replaced?)")
	}
	err = json.Unmarshal(plain, &c)
	return c, err
}
