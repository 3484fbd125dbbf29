package olt

import (
	"encoding/base64"
	"encoding/json"
	"errors"

	"routerd.dev/shared/seal"
)

// KeyFile is the name of the sealing key in the state directory: 32
// random bytes, mode 0600, created on first use (shared/seal). It is never
// stored in etcd: a copy of etcd (a backup, a snapshot) holds only
// ciphertext. Replicas of the olt service on other hosts need the same
// file.
const KeyFile = "olt-credentials.key"

// credentials are what is sealed for a registered OLT.
type credentials struct {
	User string `json:"user"`
	Pass string `json:"pass"`
}

// sealer seals credentials under the key file; the OLT's name is the
// additional data, so a sealed blob copied onto another record does not
// open. A sealed blob is base64 of the nonce and ciphertext.
type sealer struct{ key *seal.Key }

func (s *sealer) seal(name string, c credentials) (string, error) {
	plain, _ := json.Marshal(c)
	out, err := s.key.Seal(plain, "olt:"+name)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(out), nil
}

func (s *sealer) open(name, sealed string) (credentials, error) {
	var c credentials
	raw, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil {
		return c, errors.New("sealed credentials are damaged")
	}
	plain, err := s.key.Open(raw, "olt:"+name)
	switch {
	case errors.Is(err, seal.ErrDamaged):
		return c, errors.New("sealed credentials are damaged")
	case errors.Is(err, seal.ErrNotOpen):
		return c, errors.New("sealed credentials do not open with this router's key (was the key file replaced?)")
	case err != nil:
		return c, err
	}
	err = json.Unmarshal(plain, &c)
	return c, err
}
