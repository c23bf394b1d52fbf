package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"time"
)

// SessionCookie names the token mode's session cookie.
const SessionCookie = "quota_console_session"

// SessionTTL is how long a sign-in lasts.
const SessionTTL = 8 * time.Hour

// Sessions keeps signed-in users on the server under random ids; the cookie
// carries only the id. Signing out deletes the session, so a copied cookie
// stops working at once. Sessions live in memory: a restart signs everyone
// out, and several replicas need sticky sessions.
type Sessions struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	byID map[[sha256.Size]byte]session // keyed by the id's digest, not the id
}

type session struct {
	user    User
	expires time.Time
}

// NewSessions keeps sessions for ttl after sign-in.
func NewSessions(ttl time.Duration) *Sessions {
	return &Sessions{ttl: ttl, now: time.Now, byID: map[[sha256.Size]byte]session{}}
}

// Create starts a session for u and returns its id and end.
func (s *Sessions) Create(u User) (id string, expires time.Time, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", time.Time{}, err
	}
	id = base64.RawURLEncoding.EncodeToString(b)
	now := s.now()
	expires = now.Add(s.ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.byID { // sweep: sessions are few, sign-ins rare
		if !now.Before(v.expires) {
			delete(s.byID, k)
		}
	}
	s.byID[sha256.Sum256([]byte(id))] = session{user: u, expires: expires}
	return id, expires, nil
}

// Lookup returns the user of a live session.
func (s *Sessions) Lookup(id string) (User, bool) {
	if id == "" {
		return User{}, false
	}
	key := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[key]
	if !ok {
		return User{}, false
	}
	if !s.now().Before(v.expires) {
		delete(s.byID, key)
		return User{}, false
	}
	return v.user, true
}

// Delete ends a session.
func (s *Sessions) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byID, sha256.Sum256([]byte(id)))
}

// Len is the number of sessions kept (expired ones included until swept).
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}
