package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
	"github.com/porthole/porthole/server/store"
)

const (
	// SessionCookie is the name of the session cookie.
	SessionCookie = "porthole_session"
	// TokenPrefix starts every agent token.
	TokenPrefix = "pht_"

	sessionTTL       = 14 * 24 * time.Hour
	loginMaxFailures = 5 // the 6th wrong password within loginWindow from one address is refused
	loginWindow      = time.Minute
	// Per account, whatever the address: the 21st wrong password within 10 minutes is refused,
	// so rotating addresses (X-Forwarded-For through a trusted proxy, a botnet) gains little.
	userMaxFailures = 20
	userWindow      = 10 * time.Minute
	// An address that logged in to an account is "known" for that account this long: its
	// attempts on that account count only in their own bucket (loginMaxFailures per
	// loginWindow), so others' failures — from elsewhere against this account, or from this
	// address against other accounts — never lock the account's user out.
	knownTTL = 30 * 24 * time.Hour
	maxKnown = 100000
)

// principal is who made a request: a user with a session, or an agent token (acting for
// its agent's owner, on that agent only).
type principal struct {
	user        store.User
	sessionHash []byte     // set for cookie sessions
	token       *api.Token // set for agent tokens
}

func (p *principal) actor() string {
	if p.token != nil {
		return "token:" + p.token.ID
	}
	return p.user.Username
}

const principalKey = "porthole.principal"

func principalOf(c echo.Context) *principal { p, _ := c.Get(principalKey).(*principal); return p }

// newSecret returns 32 random bytes, base64url-encoded.
func newSecret() string {
	raw := make([]byte, 32)
	rand.Read(raw)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func sha(s string) []byte { h := sha256.Sum256([]byte(s)); return h[:] }

// authenticate resolves the principal from a Bearer agent token or the session cookie.
// It returns (nil, nil) when the request carries neither, and a 401 for a bad one.
func (s *Server) authenticate(c echo.Context) (*principal, error) {
	if p := principalOf(c); p != nil {
		return p, nil
	}
	r := c.Request()
	ctx := r.Context()
	var p *principal
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, secret, _ := strings.Cut(h, " ")
		if !strings.EqualFold(scheme, "Bearer") || !strings.HasPrefix(secret, TokenPrefix) {
			return nil, errorf(http.StatusUnauthorized, nil, "Authorization must be \"Bearer %s...\" (an agent token)", TokenPrefix)
		}
		tok, err := s.st.GetToken(ctx, sha(secret))
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(http.StatusUnauthorized, nil, "unknown or revoked agent token")
		} else if err != nil {
			return nil, internalError("checking the token", err)
		}
		agent, err := s.st.GetAgent(ctx, tok.AgentID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(http.StatusUnauthorized, nil, "unknown or revoked agent token")
		} else if err != nil {
			return nil, internalError("checking the token", err)
		}
		owner, err := s.st.GetUser(ctx, agent.OwnerID)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(http.StatusUnauthorized, nil, "unknown or revoked agent token")
		} else if err != nil {
			return nil, internalError("checking the token", err)
		}
		p = &principal{user: owner, token: &tok}
	} else if ck, err := r.Cookie(SessionCookie); err == nil && ck.Value != "" {
		hash := sha(ck.Value)
		uid, err := s.st.GetSession(ctx, hash)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(http.StatusUnauthorized, nil, "session expired or invalid; log in again")
		} else if err != nil {
			return nil, internalError("checking the session", err)
		}
		u, err := s.st.GetUser(ctx, uid)
		if errors.Is(err, store.ErrNotFound) {
			return nil, errorf(http.StatusUnauthorized, nil, "session expired or invalid; log in again")
		} else if err != nil {
			return nil, internalError("checking the session", err)
		}
		p = &principal{user: u, sessionHash: hash}
	} else {
		return nil, nil
	}
	c.Set(principalKey, p)
	return p, nil
}

func (s *Server) sessionCookie(c echo.Context, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name:     SessionCookie,
		Value:    value,
		Path:     "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   s.isTLS(c.Request()),
		SameSite: http.SameSiteStrictMode,
	}
}

// limited answers 429 with Retry-After for a login (or password check) the guard refused.
func (s *Server) limited(c echo.Context, wait time.Duration, why string) error {
	s.metrics.logins.WithLabelValues("limited").Inc()
	secs := int((wait + time.Second - 1) / time.Second)
	c.Response().Header().Set("Retry-After", strconv.Itoa(secs))
	return errorf(http.StatusTooManyRequests, nil, "too many failed logins %s; retry in %d s", why, secs)
}

// login: POST /api/session. Usernames match case-insensitively ("Alice" logs in as alice).
func (s *Server) login(c echo.Context) error {
	ip := c.RealIP()
	addr := limiterKey(ip)
	var req api.LoginRequest
	if err := decodeJSON(c, &req); err != nil {
		if _, done := s.limiter.addr.begin(addr, s.now()); done != nil {
			done(true, s.now()) // a malformed request counts against its address
		}
		return err
	}
	wait, done, why := s.limiter.begin(req.Username, addr, s.now())
	if wait > 0 {
		return s.limited(c, wait, why)
	}
	failed := true // until the password checks out
	defer func() { done(failed, s.now()) }()
	ctx := c.Request().Context()
	u, err := s.st.GetUserByName(ctx, req.Username)
	hash := u.PasswordHash
	if errors.Is(err, store.ErrNotFound) {
		hash = dummyHash()
	} else if err != nil {
		return internalError("logging in", err)
	}
	ok, verr := verifyPassword(hash, req.Password)
	if err != nil || !ok {
		s.metrics.logins.WithLabelValues("fail").Inc()
		s.appendAudit(ctx, api.AuditEvent{Actor: "", Action: "login.fail", Detail: "username " + strconv.Quote(truncate(req.Username, 64)), Remote: ip})
		return errorf(http.StatusUnauthorized, verr, "wrong username or password")
	}
	failed = false
	s.limiter.succeeded(u.Username, addr, s.now())
	value := newSecret()
	if err := s.st.CreateSessionInfo(ctx, u.ID, sha(value), s.now().Add(sessionTTL), c.Request().UserAgent(), ip); err != nil {
		return internalError("creating the session", err)
	}
	c.SetCookie(s.sessionCookie(c, value, int(sessionTTL/time.Second)))
	s.metrics.logins.WithLabelValues("ok").Inc()
	s.appendAudit(ctx, api.AuditEvent{Actor: u.Username, Action: "login.ok", Remote: ip})
	return c.JSON(http.StatusOK, meOf(u.User))
}

// logout: DELETE /api/session.
func (s *Server) logout(c echo.Context) error {
	p := principalOf(c)
	if p.sessionHash == nil {
		return errorf(http.StatusBadRequest, nil, "an agent token has no session to end")
	}
	if err := s.st.DeleteSession(c.Request().Context(), p.sessionHash); err != nil && !errors.Is(err, store.ErrNotFound) {
		return internalError("ending the session", err)
	}
	c.SetCookie(s.sessionCookie(c, "", -1))
	hash := hex.EncodeToString(p.sessionHash)
	s.kick(func(i socketInfo) bool { return i.session == hash }, "logged out")
	s.appendAudit(c.Request().Context(), api.AuditEvent{Actor: p.actor(), Action: "logout", Remote: c.RealIP()})
	return c.NoContent(http.StatusNoContent)
}

func meOf(u api.User) api.Me {
	return api.Me{ID: u.ID, Username: u.Username, Admin: u.Admin, Permissions: u.Permissions}
}

// limiterKey groups addresses: one IPv4 address, or one IPv6 /64 (what one client usually holds).
func limiterKey(ip string) string {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return ip
	}
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.Unmap().String()
}

// loginGuard limits password guesses per client address and per account (see the constants).
type loginGuard struct {
	addr  *loginLimiter // key: limiterKey(address)
	user  *loginLimiter // key: lower-case username
	pair  *loginLimiter // key: lower-case username + "\x00" + address, for known addresses
	mu    sync.Mutex
	known map[string]time.Time // pair key → last successful login
}

func newLoginGuard() *loginGuard {
	return &loginGuard{
		addr:  newLoginLimiter(loginMaxFailures, loginWindow),
		user:  newLoginLimiter(userMaxFailures, userWindow),
		pair:  newLoginLimiter(loginMaxFailures, loginWindow),
		known: map[string]time.Time{},
	}
}

func accountKey(username string) string {
	if len(username) > 64 { // longer names cannot exist; bound the key
		username = username[:64]
	}
	return strings.ToLower(username)
}

// begin reserves one password check on username from addr. An address that has logged in to
// the account before uses only its own bucket for that account; any other attempt counts
// against both the address and the account. It returns how long to wait (with why: which
// limit) or a done func to call once with whether the check failed.
func (g *loginGuard) begin(username, addr string, now time.Time) (time.Duration, func(bool, time.Time), string) {
	acct := accountKey(username)
	pair := acct + "\x00" + addr
	g.mu.Lock()
	t, ok := g.known[pair]
	g.mu.Unlock()
	if ok && now.Sub(t) < knownTTL {
		w, done := g.pair.begin(pair, now)
		return w, done, "from your address for this account"
	}
	w, doneAddr := g.addr.begin(addr, now)
	if w > 0 {
		return w, nil, "from your address"
	}
	w, doneUser := g.user.begin(acct, now)
	if w > 0 {
		doneAddr(false, now) // nothing was checked
		return w, nil, "for this account"
	}
	return 0, func(failed bool, now time.Time) { doneAddr(failed, now); doneUser(failed, now) }, ""
}

// succeeded records a successful login to username from addr.
func (g *loginGuard) succeeded(username, addr string, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.known) >= maxKnown {
		for k, t := range g.known {
			if now.Sub(t) >= knownTTL || len(g.known) >= maxKnown {
				delete(g.known, k)
			}
		}
	}
	g.known[accountKey(username)+"\x00"+addr] = now
}

// loginLimiter counts failed logins per key (an address, an account) in a sliding window. Attempts still
// being checked count against the limit too, so a burst of parallel guesses cannot all pass
// the check before the first failure is recorded.
type loginLimiter struct {
	max      int
	window   time.Duration
	mu       sync.Mutex
	fails    map[string][]time.Time // at most max entries each, oldest first
	inflight map[string]int         // attempts begun and not yet done
}

func newLoginLimiter(max int, window time.Duration) *loginLimiter {
	return &loginLimiter{max: max, window: window, fails: map[string][]time.Time{}, inflight: map[string]int{}}
}

// inflightRetry is what a client is told to wait when only attempts in progress fill its quota.
const inflightRetry = time.Second

// begin reserves one attempt for key: it returns how long key must wait (and no reservation),
// or 0 and done, which the caller must call once with whether the attempt failed.
func (l *loginLimiter) begin(key string, now time.Time) (wait time.Duration, done func(failed bool, now time.Time)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.prune(key, now)
	if len(f) >= l.max {
		return f[0].Add(l.window).Sub(now), nil
	}
	if len(f)+l.inflight[key] >= l.max {
		return inflightRetry, nil
	}
	l.inflight[key]++
	var once sync.Once
	return 0, func(failed bool, now time.Time) {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.inflight[key]--; l.inflight[key] <= 0 {
				delete(l.inflight, key)
			}
			if failed {
				l.failLocked(key, now)
			}
		})
	}
}

// failLocked records a failure; callers hold mu.
func (l *loginLimiter) failLocked(key string, now time.Time) {
	if len(l.fails) > 10000 { // bound memory under an address-spraying attack
		for k := range l.fails {
			l.prune(k, now)
		}
	}
	f := append(l.prune(key, now), now)
	if len(f) > l.max {
		f = f[len(f)-l.max:]
	}
	l.fails[key] = f
}

// prune drops failures older than the window; callers hold mu.
func (l *loginLimiter) prune(key string, now time.Time) []time.Time {
	f := l.fails[key]
	i := 0
	for i < len(f) && now.Sub(f[i]) >= l.window {
		i++
	}
	f = f[i:]
	if len(f) == 0 {
		delete(l.fails, key)
		return nil
	}
	l.fails[key] = f
	return f
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// appendAudit records e; a failure is logged, never shown to the client.
func (s *Server) appendAudit(ctx context.Context, e api.AuditEvent) {
	if err := s.st.AppendAudit(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("audit append failed", "action", e.Action, "err", err)
	}
}
