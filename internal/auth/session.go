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

// ErrSessionTooLarge is a user with so many groups (or attributes) that the
// session does not fit in a cookie.
var ErrSessionTooLarge = errors.New("the account has too many groups or attributes to keep in a session cookie")

// ErrSignOutsFull refuses a sign-in while the list of signed-out accounts is
// full: a sign-out the console could not keep would let a copied cookie work
// again, so it takes no session it might have to forget.
var ErrSignOutsFull = errors.New("the list of signed-out accounts is full")

// Session is one sign-in: who, when, until when, and a random id the CSRF
// tokens of the session are bound to.
type Session struct {
	ID      string
	User    User
	Issued  time.Time
	Expires time.Time
}

// Sessions are sealed in their cookie (AES-GCM with the session key, the
// cluster and the auth mode as authenticated data): the console keeps
// nothing per session, any replica with the same key reads them, and a
// restart keeps them. Signing out ends every session of the account issued
// until then, in every browser: SignOuts keeps one time per account, which
// replicas share, so a copied cookie stops working everywhere.
type Sessions struct {
	keys     Keys
	ttl      time.Duration
	now      func() time.Time
	signOuts SignOuts
	// gcm seals and opens the cookies (safe for concurrent use).
	gcm cipher.AEAD
	// opened are the cookies opened lately: a browser sends its cookie
	// with every request, and opening it (AES-GCM, JSON, the account's
	// HMAC) costs more than the rest of the request's checks together.
	// Only what opened is kept; every lookup still checks the expiry and
	// the account's sign-outs (Current).
	opened openedSessions
}

// openedSessions are sessions by the cookie value they were opened from.
type openedSessions struct {
	mu      sync.Mutex
	byValue map[string]openedSession
}

type openedSession struct {
	sess    Session
	account string // s.account(sess.User.Name)
}

// maxOpenedSessions bounds the opened sessions kept (a cookie is at most
// maxCookieBytes); past it they are all forgotten and opened again as they
// come.
const maxOpenedSessions = 1024

func (o *openedSessions) get(value string) (openedSession, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	got, ok := o.byValue[value]
	return got, ok
}

func (o *openedSessions) put(value string, sess openedSession) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byValue == nil || len(o.byValue) >= maxOpenedSessions {
		o.byValue = map[string]openedSession{}
	}
	o.byValue[value] = sess
}

// NewSessions keeps sessions for at most ttl, sealed with keys; sign-outs
// are kept in s (in this process when nil).
func NewSessions(keys Keys, ttl time.Duration, s SignOuts) *Sessions {
	if s == nil {
		s = NewMemorySignOuts(DefaultMaxSignOuts, ttl)
	}
	return &Sessions{keys: keys, ttl: ttl, now: time.Now, signOuts: s, gcm: newAEAD(keys)}
}

type sealed struct {
	ID      string              `json:"i"`
	Name    string              `json:"u"`
	UID     string              `json:"d,omitempty"`
	Groups  []string            `json:"g,omitempty"`
	Extra   map[string][]string `json:"x,omitempty"`
	Issued  int64               `json:"t"` // unix milliseconds
	Expires int64               `json:"e"` // unix seconds
}

// Create starts a session for u that ends at the earlier of the TTL and
// notAfter (the token's own expiry; zero when unknown), and returns the
// cookie value. It refuses with ErrSignOutsFull an account that would need
// a new entry in a full list of sign-outs.
func (s *Sessions) Create(u User, notAfter time.Time) (string, Session, error) {
	account := s.account(u.Name)
	signedOut := s.signOuts.SignedOutAt(account)
	if signedOut.IsZero() && s.signOuts.Full() {
		return "", Session{}, ErrSignOutsFull
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", Session{}, err
	}
	now := s.now()
	// A session begins after the account's last sign-out, even if that
	// was stamped by a replica whose clock runs a little ahead.
	issued := now.Truncate(time.Millisecond)
	if !issued.After(signedOut) {
		issued = signedOut.Add(time.Millisecond)
	}
	sess := Session{ID: base64.RawURLEncoding.EncodeToString(id), User: u, Issued: issued, Expires: now.Add(s.ttl)}
	if !notAfter.IsZero() && notAfter.Before(sess.Expires) {
		sess.Expires = notAfter
	}
	plain, err := json.Marshal(sealed{ID: sess.ID, Name: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra,
		Issued: sess.Issued.UnixMilli(), Expires: sess.Expires.Unix()})
	if err != nil {
		return "", Session{}, err
	}
	gcm := s.gcm
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", Session{}, err
	}
	value := base64.RawURLEncoding.EncodeToString(gcm.Seal(nonce, nonce, plain, s.additionalData()))
	if len(value) > maxCookieBytes {
		return "", Session{}, ErrSessionTooLarge
	}
	return value, sess, nil
}

// Lookup opens a cookie value: the session, if it is genuine, sealed for
// this cluster and mode, and still current (see Current). A value opened
// before is not opened again, but its session is checked again. The
// session's Groups and Extra may be shared with other lookups of the same
// value: read them, never change them.
func (s *Sessions) Lookup(value string) (Session, bool) {
	if o, ok := s.opened.get(value); ok {
		if !s.current(o.sess, o.account) {
			return Session{}, false
		}
		return o.sess, true
	}
	raw, err := base64.RawURLEncoding.DecodeString(value)
	gcm := s.gcm
	if err != nil || len(raw) < gcm.NonceSize() {
		return Session{}, false
	}
	plain, err := gcm.Open(nil, raw[:gcm.NonceSize()], raw[gcm.NonceSize():], s.additionalData())
	if err != nil {
		return Session{}, false
	}
	var v sealed
	if json.Unmarshal(plain, &v) != nil || v.ID == "" || v.Name == "" || v.Issued == 0 {
		return Session{}, false
	}
	sess := Session{ID: v.ID, User: User{Name: v.Name, UID: v.UID, Groups: v.Groups, Extra: v.Extra},
		Issued: time.UnixMilli(v.Issued), Expires: time.Unix(v.Expires, 0)}
	account := s.account(sess.User.Name)
	if !s.current(sess, account) {
		return Session{}, false
	}
	s.opened.put(value, openedSession{sess: sess, account: account})
	return sess, true
}

// Current reports whether sess has neither expired nor been signed out
// since it was opened; a long request (a live stream) asks again.
func (s *Sessions) Current(sess Session) bool {
	return s.current(sess, s.account(sess.User.Name))
}

// current is Current of sess, whose account is account.
func (s *Sessions) current(sess Session, account string) bool {
	return s.now().Before(sess.Expires) && sess.Issued.After(s.signOuts.SignedOutAt(account))
}

// End signs sess's account out: every session of the account issued until
// now ends, on every replica.
func (s *Sessions) End(ctx context.Context, sess Session) error {
	at := s.now().Truncate(time.Millisecond)
	if !at.After(sess.Issued) { // a replica's clock behind the one that issued sess
		at = sess.Issued
	}
	return s.signOuts.SignOut(ctx, s.account(sess.User.Name), at)
}

// account is the name under which an account's sign-out is kept: a keyed
// hash of the user name, short and of a fixed alphabet (a ConfigMap key),
// that says nothing about who signed out to a reader of the list.
func (s *Sessions) account(user string) string {
	return base64.RawURLEncoding.EncodeToString(mac(s.keys.signOut, user)[:16])
}

// additionalData binds a sealed session to its cookie, the cluster and the
// auth mode (Keys.For).
func (s *Sessions) additionalData() []byte {
	return []byte(SessionCookie + "\x00" + s.keys.bound)
}

func newAEAD(keys Keys) cipher.AEAD {
	block, err := aes.NewCipher(keys.session[:])
	if err != nil {
		panic(err) // a 32-byte key always makes a cipher
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return gcm
}

// SignOuts keep, per account, when it last signed out; sessions of the
// account issued until then are over. An entry is needed only while such a
// session could still be open: for the session TTL.
type SignOuts interface {
	// SignOut records that account signed out at at.
	SignOut(ctx context.Context, account string, at time.Time) error
	// SignedOutAt is when account last signed out within the TTL; zero if
	// it did not.
	SignedOutAt(account string) time.Time
	// Full reports whether the list holds as many entries as it may; new
	// accounts are not signed in then (ErrSignOutsFull).
	Full() bool
}

// DefaultMaxSignOuts bounds the accounts whose sign-out is kept at once.
// Each is a key and value of 35 bytes: 10 000 take 350 kB of a ConfigMap's
// 1 MiB, leaving room for the sign-outs of sessions opened before the list
// filled up. (A sign-out costs the apiserver a rewrite of the list, so its
// time grows with the list; one account signing out again keeps one entry.)
const DefaultMaxSignOuts = 10000

// MemorySignOuts keeps sign-outs in this process (one replica).
type MemorySignOuts struct {
	max int
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	at map[string]time.Time
}

// NewMemorySignOuts keeps the sign-outs of at most max accounts for ttl.
func NewMemorySignOuts(max int, ttl time.Duration) *MemorySignOuts {
	return &MemorySignOuts{max: max, ttl: ttl, now: time.Now, at: map[string]time.Time{}}
}

// SignOut implements SignOuts. It never forgets a sign-out within the TTL,
// even past max: Full stops the sign-ins that would need more.
func (m *MemorySignOuts) SignOut(_ context.Context, account string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if at.After(m.at[account]) {
		m.at[account] = at
	}
	if len(m.at) >= m.max {
		m.pruneLocked()
	}
	return nil
}

// SignedOutAt implements SignOuts.
func (m *MemorySignOuts) SignedOutAt(account string) time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.at[account]
}

// Full implements SignOuts.
func (m *MemorySignOuts) Full() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.at) >= m.max {
		m.pruneLocked()
	}
	return len(m.at) >= m.max
}

// Len is how many accounts' sign-outs are kept.
func (m *MemorySignOuts) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.at)
}

func (m *MemorySignOuts) pruneLocked() {
	for account, at := range m.at {
		if SignOutExpired(at, m.now(), m.ttl) {
			delete(m.at, account)
		}
	}
}

// Replicated are sign-outs kept in shared, which every replica reads, and
// in this process too, so that a sign-out holds here at once, before shared
// is read back.
func Replicated(shared SignOuts, max int, ttl time.Duration) SignOuts {
	return replicated{local: NewMemorySignOuts(max, ttl), shared: shared}
}

type replicated struct {
	local  *MemorySignOuts
	shared SignOuts
}

func (r replicated) SignOut(ctx context.Context, account string, at time.Time) error {
	_ = r.local.SignOut(ctx, account, at)
	return r.shared.SignOut(ctx, account, at)
}

func (r replicated) SignedOutAt(account string) time.Time {
	at := r.local.SignedOutAt(account)
	if shared := r.shared.SignedOutAt(account); shared.After(at) {
		at = shared
	}
	return at
}

func (r replicated) Full() bool { return r.local.Full() || r.shared.Full() }

// SignOutExpiry is SignOutExpired for sessions that last ttl.
func SignOutExpiry(ttl time.Duration) func(at, now time.Time) bool {
	return func(at, now time.Time) bool { return SignOutExpired(at, now, ttl) }
}

// SignOutExpired reports whether a sign-out at at can be forgotten at now:
// every session it ended has expired by itself.
func SignOutExpired(at, now time.Time, ttl time.Duration) bool {
	return !now.Before(at.Add(ttl))
}
