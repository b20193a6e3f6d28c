package server

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"

	"github.com/labstack/echo/v4"
)

// contentSecurityPolicy lets the WASM app run ('wasm-unsafe-eval') without allowing eval.
const contentSecurityPolicy = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; connect-src 'self'; worker-src 'self'; manifest-src 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// securityHeaders sets the browser hardening headers on every response.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if s.isTLS(c.Request()) {
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		if strings.HasPrefix(c.Request().URL.Path, "/api/") {
			h.Set("Cache-Control", "no-store")
		}
		return next(c)
	}
}

// originCheck refuses a state-changing request or a WebSocket upgrade whose Origin is
// present and foreign. A missing Origin is allowed: browsers send one on every such
// request, SameSite=Strict keeps the cookie off cross-site requests, and non-browser
// clients (curl, agent programs with a token) send none.
func (s *Server) originCheck(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			if !c.IsWebSocket() {
				return next(c)
			}
		}
		if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(r, o) {
			return errorf(http.StatusForbidden, nil, "cross-origin request refused (Origin %s)", o)
		}
		return next(c)
	}
}

// originAllowed: same-origin (the Origin's host equals the request's Host) or configured.
func (s *Server) originAllowed(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	n, err := normalizeOrigin(origin)
	return err == nil && s.origins[n]
}

func normalizeOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return "", errors.New("an origin is scheme://host[:port]")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// peerAddr is the TCP peer of r.
func peerAddr(r *http.Request) (netip.Addr, bool) {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err == nil {
		return ap.Addr().Unmap(), true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is the real client address: the TCP peer, unless the peer is a trusted proxy,
// in which case X-Forwarded-For is walked from the right, skipping trusted proxies, and the
// first untrusted address is the client. Echo's own extractors are not used: by default they
// trust private and loopback peers.
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	peer, ok := peerAddr(r)
	if !ok {
		return netip.Addr{}
	}
	if !s.trusted(peer) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break // a malformed hop: stop at the last address we could trust
		}
		client = a.Unmap()
		if !s.trusted(client) {
			break
		}
	}
	return client
}

// realIP is Echo's IPExtractor.
func (s *Server) realIP(r *http.Request) string {
	a := s.clientAddr(r)
	if !a.IsValid() {
		return r.RemoteAddr
	}
	return a.String()
}

// isTLS: the connection is TLS, or a trusted proxy says the client's was.
func (s *Server) isTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	if peer, ok := peerAddr(r); ok && s.trusted(peer) {
		return strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	}
	return false
}

// hostAllow is the Host header allowlist: a page on a rebinding attacker's name (evil.example
// resolving to this server) sends Host: evil.example and is refused, so its script cannot read
// or drive the API even though the browser treats it as same-origin.
type hostAllow struct {
	any   bool
	names map[string]bool // lower-case host names, no port
}

// newHostAllow allows IP literals always, and by name: localhost, this machine's hostname, the
// listen address's host, the hosts of the allowed origins, and extra ("*" = any host).
func newHostAllow(addr string, extra []string, origins map[string]bool) (hostAllow, error) {
	h := hostAllow{names: map[string]bool{"localhost": true}}
	if hn, err := os.Hostname(); err == nil && hn != "" {
		h.names[strings.ToLower(hn)] = true
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && host != "" {
		h.names[strings.ToLower(host)] = true
	}
	for o := range origins {
		if u, err := url.Parse(o); err == nil && u.Hostname() != "" {
			h.names[strings.ToLower(u.Hostname())] = true
		}
	}
	for _, e := range extra {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "*":
			h.any = true
		case e == "" || strings.ContainsAny(e, "/:@ "):
			return h, fmt.Errorf("allowed host %q: a host name without scheme or port, or *", e)
		default:
			h.names[strings.TrimSuffix(e, ".")] = true
		}
	}
	return h, nil
}

func (h hostAllow) allows(hostHeader string) bool {
	if h.any {
		return true
	}
	host := hostHeader
	if hn, _, err := net.SplitHostPort(hostHeader); err == nil {
		host = hn
	}
	host = strings.TrimSuffix(strings.Trim(strings.ToLower(host), "[]"), ".")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	return host != "" && h.names[host]
}

// hostCheck answers 421 for a Host the gateway does not serve (see hostAllow).
func (s *Server) hostCheck(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if h := c.Request().Host; !s.hosts.allows(h) {
			return errorf(http.StatusMisdirectedRequest, nil,
				"this server does not serve the host %q; an admin can allow it with --allowed-host", truncate(h, 100))
		}
		return next(c)
	}
}

// jsonOnly refuses a state-changing request with a body that is not application/json (415):
// a browser can send text/plain, form or multipart bodies cross-site without a preflight,
// JSON it cannot. Bodiless requests (DELETE, POST .../tokens) pass.
func jsonOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		switch r.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return next(c)
		}
		if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
			return next(c)
		}
		ct := r.Header.Get("Content-Type")
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			if ct == "" {
				ct = "none"
			}
			return errorf(http.StatusUnsupportedMediaType, nil, "request bodies must be JSON: send Content-Type: application/json (got %s)", truncate(ct, 100))
		}
		return next(c)
	}
}
