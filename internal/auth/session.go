package auth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"sync"
	"time"
)

// SessionCookie names the token mode's session cookie; on TLS it carries the
// __Host- prefix (see cookieName).
const SessionCookie = "quota_console_session"

// SessionTTL is the longest a sign-in lasts; a token that expires sooner ends
// the session sooner.
const SessionTTL = 8 * time.Hour

// maxCookieBytes keeps a session cookie under the 4 KiB browsers accept.
const maxCookieBytes = 3800

// ErrSessionTooLarge is a user with so many groups that the session does
// not fit in a cookie.
var ErrSessionTooLarge = errors.New("the account has too many groups to keep in a session cookie")

// Session is one sign-in: who, until when, and a random id by which signing
// out revokes it.
type Session struct {
	ID      string
	User    User
	Expires time.Time
}

// Sessions are sealed in their cookie (AES-GCM with the session key): the
// console keeps nothing per session, any replica with the same key reads
// them, and a restart keeps them. Signing out revokes the session's id in
// Revocations, which replicas share, so a copied cookie stops working
// everywhere.
type Sessions struct {
	keys        Keys
	ttl         time.Duration
	now         func() time.Time
	revocations Revocations
}

// NewSessions keeps sessions for at most ttl, sealed with keys; revoked ids
// are kept in r (in memory when nil).
func NewSessions(keys Keys, ttl time.Duration, r Revocations) *Sessions {
	if r == nil {
		r = NewMemoryRevocations(DefaultMaxRevocations)
	}
	return &Sessions{keys: keys, ttl: ttl, now: time.Now, revocations: r}
}

type sealed struct {
	ID      string   `json:"i"`
	Name    string   `json:"u"`
	Groups  []string `json:"g,omitempty"`
	Expires int64    `json:"e"`
}

// Create starts a session for u that ends at the earlier of the TTL and
// notAfter (the token's own expiry; zero when unknown), and returns the
// cookie value.
func (s *Sessions) Create(u User, notAfter time.Time) (string, Session, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", Session{}, err
	}
	sess := Session{ID: base64.RawURLEncoding.EncodeToString(id), User: u, Expires: s.now().Add(s.ttl)}
	if !notAfter.IsZero() && notAfter.Before(sess.Expires) {
		sess.Expires = notAfter
	}
	plain, err := json.Marshal(sealed{ID: sess.ID, Name: u.Name, Groups: u.Groups, Expires: sess.Expires.Unix()})
	if err != nil {
		return "", Session{}, err
	}
	gcm := s.aead()
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", Session{}, err
	}
	value := base64.RawURLEncoding.EncodeToString(gcm.Seal(nonce, nonce, plain, []byte(SessionCookie)))
	if len(value) > maxCookieBytes {
		return "", Session{}, ErrSessionTooLarge
	}
	return value, sess, nil
}

// Lookup opens a cookie value: the session, if it is genuine, not expired
// and not revoked.
func (s *Sessions) Lookup(value string) (Session, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(value)
	gcm := s.aead()
	if err != nil || len(raw) < gcm.NonceSize() {
		return Session{}, false
	}
	plain, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], []byte(SessionCookie))
	if err != nil {
		return Session{}, false
	}
	var v sealed
	if json.Unmarshal(plain, &v) != nil || v.ID == "" || v.Name == "" {
		return Session{}, false
	}
	sess := Session{ID: v.ID, User: User{Name: v.Name, Groups: v.Groups}, Expires: time.Unix(v.Expires, 0)}
	if !s.now().Before(sess.Expires) || s.revocations.Revoked(sess.ID) {
		return Session{}, false
	}
	return sess, true
}

// End revokes a session until it would have expired anyway.
func (s *Sessions) End(ctx context.Context, sess Session) error {
	return s.revocations.Revoke(ctx, sess.ID, sess.Expires)
}

func (s *Sessions) aead() cipher.AEAD {
	block, err := aes.NewCipher(s.keys.session[:])
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return gcm
}

// Revocations remember signed-out session ids until the sessions would have
// expired.
type Revocations interface {
	Revoke(ctx context.Context, id string, until time.Time) error
	Revoked(id string) bool
}

// DefaultMaxRevocations bounds the signed-out sessions remembered at once;
// beyond it the ones that expire soonest are forgotten first.
const DefaultMaxRevocations = 20000

// MemoryRevocations keeps revoked ids in this process (one replica).
type MemoryRevocations struct {
	max int
	now func() time.Time

	mu    sync.Mutex
	until map[string]time.Time
}

// NewMemoryRevocations remembers at most max revoked ids.
func NewMemoryRevocations(max int) *MemoryRevocations {
	return &MemoryRevocations{max: max, now: time.Now, until: map[string]time.Time{}}
}

// Revoke implements Revocations.
func (m *MemoryRevocations) Revoke(_ context.Context, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.until[id] = until
	if len(m.until) > m.max {
		m.until = PruneRevocations(m.until, m.now(), m.max)
	}
	return nil
}

// Revoked implements Revocations.
func (m *MemoryRevocations) Revoked(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.until[id]
	return ok
}

// Len is how many revoked ids are remembered.
func (m *MemoryRevocations) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.until)
}

// PruneRevocations drops expired entries, then, while there are more than
// max, those that expire soonest (their sessions are the closest to ending
// by themselves).
func PruneRevocations(until map[string]time.Time, now time.Time, max int) map[string]time.Time {
	kept := make(map[string]time.Time, len(until))
	for id, t := range until {
		if now.Before(t) {
			kept[id] = t
		}
	}
	for len(kept) > max {
		var soonest string
		for id, t := range kept {
			if soonest == "" || t.Before(kept[soonest]) {
				soonest = id
			}
		}
		delete(kept, soonest)
	}
	return kept
}
