// Package seal keeps secrets sealed at rest: AES-256-GCM under a key of
// this host kept in a file (32 random bytes, mode 0600, made on first
// use), never in etcd, so etcd, its snapshots, saved versions and backups
// hold only ciphertext. The additional data of each value names what it
// is (an OLT's name, a BGP peer, the SNMP community), so a sealed value
// copied onto another record does not open. A router restored on other
// hardware needs the key files of the old one for its secrets to open.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Errors of Open and OpenText, for callers to say in their own words.
var (
	// ErrNotSealed is a text value without the sealed form.
	ErrNotSealed = errors.New("seal: not a sealed value")
	// ErrDamaged is a value too short to hold a nonce.
	ErrDamaged = errors.New("seal: sealed value damaged")
	// ErrNotOpen is a value sealed under another key or for another
	// record.
	ErrNotOpen = errors.New("seal: does not open with this host's key")
)

// TextPrefix marks the text form of a sealed value (SealText): the
// version of the scheme, then base64 of the nonce and ciphertext.
const TextPrefix = "v1:"

// Key is a host's sealing key, read from its file (or made there) on
// first use.
type Key struct {
	path string
	once sync.Once
	aead cipher.AEAD
	err  error
}

// New returns the key kept in the file at path; nothing is read yet.
func New(path string) *Key { return &Key{path: path} }

// Load reads or makes the key now, for a service that must not start
// without one.
func (k *Key) Load() error {
	_, err := k.load()
	return err
}

func (k *Key) load() (cipher.AEAD, error) {
	k.once.Do(func() {
		key, err := readOrCreate(k.path)
		if err != nil {
			k.err = err
			return
		}
		b, err := aes.NewCipher(key)
		if err != nil {
			k.err = err
			return
		}
		k.aead, k.err = cipher.NewGCM(b)
	})
	return k.aead, k.err
}

// readOrCreate reads the 32-byte key at path, making it when there is
// none (exclusively: a replica that made it first wins, and its key is
// read).
func readOrCreate(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err == nil {
		if len(raw) != 32 {
			return nil, fmt.Errorf("seal: %s: want a 32-byte key, have %d bytes", path, len(raw))
		}
		return raw, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("seal: read key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("seal: key directory: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return readOrCreate(path)
	}
	if err != nil {
		return nil, fmt.Errorf("seal: create key: %w", err)
	}
	_, werr := f.Write(key)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return nil, fmt.Errorf("seal: write key: %w", werr)
	}
	return key, nil
}

// Seal encrypts plain for the record named by aad: a fresh nonce, then
// the ciphertext.
func (k *Key) Seal(plain []byte, aad string) ([]byte, error) {
	g, err := k.load()
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return g.Seal(nonce, nonce, plain, []byte(aad)), nil
}

// Open decrypts what Seal made for the same aad: ErrDamaged, ErrNotOpen,
// or the key file's error.
func (k *Key) Open(sealed []byte, aad string) ([]byte, error) {
	g, err := k.load()
	if err != nil {
		return nil, err
	}
	if len(sealed) < g.NonceSize() {
		return nil, ErrDamaged
	}
	plain, err := g.Open(nil, sealed[:g.NonceSize()], sealed[g.NonceSize():], []byte(aad))
	if err != nil {
		return nil, ErrNotOpen
	}
	return plain, nil
}

// SealText is Seal in text form, TextPrefix and base64; "" stays "" (no
// secret set).
func (k *Key) SealText(clear, aad string) (string, error) {
	if clear == "" {
		return "", nil
	}
	raw, err := k.Seal([]byte(clear), aad)
	if err != nil {
		return "", err
	}
	return TextPrefix + base64.StdEncoding.EncodeToString(raw), nil
}

// OpenText opens what SealText made: ErrNotSealed for a value without its
// form, else as Open.
func (k *Key) OpenText(sealed, aad string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, TextPrefix)
	raw, err := base64.StdEncoding.DecodeString(rest)
	if !ok || err != nil {
		return "", ErrNotSealed
	}
	plain, err := k.Open(raw, aad)
	return string(plain), err
}

// IsText reports whether v has the text form of a sealed value.
func IsText(v string) bool { return strings.HasPrefix(v, TextPrefix) }
