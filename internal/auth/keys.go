package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"strings"
)

// MinKeyLength is the shortest session key the console accepts (bytes).
const MinKeyLength = 32

// Keys are the secrets the console signs and seals with: session cookies,
// CSRF tokens, flash messages and the names under which sign-outs are kept
// each get their own key, derived from one secret. Replicas that share the
// secret (--session-key-file, a Secret in a cluster install) accept each
// other's cookies and tokens.
type Keys struct {
	session, csrf, flash, signOut [32]byte
	// bound names the cluster and auth mode the keys serve (see For): it is
	// part of what every session, CSRF token and flash message
	// authenticates.
	bound string
}

// NewKeys derives the keys from a secret of at least MinKeyLength bytes.
func NewKeys(secret []byte) (Keys, error) {
	if len(secret) < MinKeyLength {
		return Keys{}, fmt.Errorf("the session key is %d bytes, at least %d are needed", len(secret), MinKeyLength)
	}
	derive := func(label string) (k [32]byte) {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("quota-console " + label))
		copy(k[:], m.Sum(nil))
		return k
	}
	return Keys{session: derive("session"), csrf: derive("csrf"), flash: derive("flash"), signOut: derive("sign-out")}, nil
}

// RandomKeys are keys known to this process only: a restart signs everyone
// out, and another replica accepts none of its cookies.
func RandomKeys() Keys {
	secret := make([]byte, MinKeyLength)
	if _, err := rand.Read(secret); err != nil {
		panic("auth: no randomness: " + err.Error()) // crypto/rand never fails on Linux
	}
	k, _ := NewKeys(secret)
	return k
}

// ReadKeyFile reads --session-key-file. Surrounding white space is not part
// of the key.
func ReadKeyFile(path string) (Keys, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Keys{}, fmt.Errorf("--session-key-file: %w", err)
	}
	k, err := NewKeys([]byte(strings.TrimSpace(string(b))))
	if err != nil {
		return Keys{}, fmt.Errorf("--session-key-file %s: %w", path, err)
	}
	return k, nil
}

// For binds the keys to one cluster (the UID of its kube-system namespace)
// and auth mode: a session cookie, CSRF token or flash message made by a
// console of another cluster or mode does not open or verify here, even
// when the consoles share a session key.
func (k Keys) For(cluster string, mode Mode) Keys {
	k.bound = cluster + "\x00" + string(mode)
	return k
}

func mac(key [32]byte, parts ...string) []byte {
	m := hmac.New(sha256.New, key[:])
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}
