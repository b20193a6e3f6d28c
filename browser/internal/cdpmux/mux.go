// Package cdpmux multiplexes several CDP clients over one connection to a browser (the
// Chrome DevTools Protocol, NUL-delimited JSON as on Chromium's --remote-debugging-pipe).
//
// Rules (docs/browser-cdp.md):
//   - Each client gets a browser-level session of its own (Target.attachToBrowserTarget):
//     its messages without a sessionId go to that session, so browser-wide state a client
//     sets (Target.setDiscoverTargets, setAutoAttach, download behaviour) and the events it
//     causes are its own, and the session id is hidden from the client.
//   - Each client has its own message-id space: ids are rewritten to the mux's own on the
//     way in and mapped back on the way out. The map is keyed by the mux's ids, and each
//     client may have at most Config.MaxPending calls in flight (beyond that a call is
//     answered with a CDP error and not sent).
//   - Sessions are flattened: a session (Target.attachToTarget result, Target.attachedToTarget
//     event) belongs to the client whose session it was created from; its replies and events
//     go to that client only; a client may address only its own sessions. At most
//     Config.MaxSessions per client are tracked.
//   - Events without a sessionId (none, unless a root-level client of the browser enabled
//     them) go to every client.
//   - Everything from the browser is untrusted: a message over Config.MaxMessage bytes, or
//     malformed JSON, is dropped with a log; replies to unknown ids and events of unknown
//     sessions are dropped.
//   - A slow client never blocks the others: each has a bounded queue (messages and bytes);
//     a client that overflows it is closed with ErrSlowClient.
//   - At most Config.MaxClients clients share one browser.
//   - Browser.close from a client is answered locally (the browser is shared); Browser.crash,
//     methods that open a TCP port (Tethering.bind) and Target.exposeDevToolsProtocol are
//     refused for every client (Refused).
//   - Memory is bounded per mux, whatever the browser or the clients do: besides each
//     client's queue, all clients' queues together (Config.MuxQueueBytes: the client with the
//     longest queue is closed as slow) and the calls waiting for the browser connection's
//     writer (Config.OutBytes: senders wait) are bounded in bytes; session ids from the
//     browser are at most MaxSessionID bytes.
package cdpmux

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults of Config.
const (
	// DefaultMaxMessage bounds one message either way. Screenshots are the large ones: a
	// full-page PNG (captureBeyondViewport) of a long page at 1920 px wide is tens of MB once
	// base64-encoded, and Page.printToPDF is alike; 64 MiB takes those and still bounds what
	// one message from the sandbox can make the gateway hold.
	DefaultMaxMessage = 64 << 20
	// DefaultMaxPending calls in flight per client.
	DefaultMaxPending = 1024
	// DefaultMaxSessions tracked per client (tabs, iframes, workers attached).
	DefaultMaxSessions = 4096
	// DefaultQueueMessages and DefaultQueueBytes bound a client's queue of replies and events
	// not yet received (at least one message always fits, whatever its size).
	DefaultQueueMessages = 4096
	DefaultQueueBytes    = 128 << 20
	// DefaultMaxClients on one browser (each is a browser session in Chromium).
	DefaultMaxClients = 64
	// DefaultMuxQueueBytes bounds all clients' queues of one mux together (a browser that
	// floods every client of its own cannot make the gateway hold MaxClients × QueueBytes).
	DefaultMuxQueueBytes = 256 << 20
	// DefaultOutBytes bounds the calls queued for the browser connection's writer (a browser
	// that stops reading its pipe while clients send large calls).
	DefaultOutBytes = 128 << 20
	// MaxSessionID is the longest session id accepted from the browser (Chromium's are 32
	// hex digits); a message with a longer one is dropped, so that session maps hold short keys.
	MaxSessionID = 128
	// writeQueue is how many messages wait for the browser connection's writer.
	writeQueue = 256
	// attachTimeout bounds NewClient's wait for the browser session.
	attachTimeout = 20 * time.Second
	// closeFlushTimeout bounds Close's wait for the detaches of the open clients to be written.
	closeFlushTimeout = time.Second
)

// Errors.
var (
	// ErrClosed: the client or the mux was closed.
	ErrClosed = errors.New("cdp client closed")
	// ErrSlowClient: the client did not read its replies and events fast enough; its queue
	// overflowed and it was closed (the browser and the other clients go on).
	ErrSlowClient = errors.New("cdp client too slow: its queue of replies and events overflowed, so it was disconnected")
	// ErrBrowserGone: the connection to the browser ended.
	ErrBrowserGone = errors.New("the browser connection ended")
	// ErrTooManyClients: the browser has Config.MaxClients clients already.
	ErrTooManyClients = errors.New("too many CDP clients on this browser")
	// ErrBadMessage: a client sent something that is not a CDP call.
	ErrBadMessage = errors.New("not a CDP call: want a JSON object with an integer \"id\" and a \"method\"")
)

// Config tunes a Mux; zero values take the defaults.
type Config struct {
	MaxMessage    int
	MaxClients    int
	MaxPending    int
	MaxSessions   int
	QueueMessages int
	QueueBytes    int
	MuxQueueBytes int
	OutBytes      int
	Logger        *slog.Logger
	// OnIdle, if set, is called (without locks held) whenever the last client closed.
	OnIdle func()
	// ExitMethod is a root-level event the far end sends before it closes the connection on
	// purpose (the helper's "browser exited" notice): its params.message becomes the mux's
	// error. Empty = none.
	ExitMethod string
}

// Mux is one browser connection shared by clients. Its reader and writer goroutines are
// owned by the Mux: they exit when the connection ends or Close is called; Close waits for them.
type Mux struct {
	cfg  Config
	log  *slog.Logger
	conn io.ReadWriteCloser
	out  chan []byte
	done chan struct{} // closed when the mux has ended (err set)
	wg   sync.WaitGroup

	mu       sync.Mutex
	err      error
	nextID   uint32
	pending  map[uint32]*call     // by the mux's ids
	sessions map[string]*Client   // session id → owner
	clients  map[*Client]struct{} // open clients
	opening  int                  // NewClient calls waiting for their browser session
	dropped  int                  // messages dropped (logged every 100)

	queued atomic.Int64 // bytes in all clients' queues (Config.MuxQueueBytes)

	outMu    sync.Mutex
	outBytes int           // bytes of the calls in out (Config.OutBytes)
	outFreed chan struct{} // closed (and replaced) whenever outBytes went down
}

type call struct {
	client   *Client         // nil: the mux's own call
	clientID json.RawMessage // the client's id, returned as it was
	session  string          // the client's session the call went to ("" = its browser session)
	method   string
	reply    chan *msg // the mux's own calls
}

// New starts a mux on conn (NUL-delimited CDP messages both ways); it owns conn.
func New(conn io.ReadWriteCloser, cfg Config) *Mux {
	if cfg.MaxMessage <= 0 {
		cfg.MaxMessage = DefaultMaxMessage
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.QueueMessages <= 0 {
		cfg.QueueMessages = DefaultQueueMessages
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = DefaultQueueBytes
	}
	if cfg.MuxQueueBytes <= 0 {
		cfg.MuxQueueBytes = DefaultMuxQueueBytes
	}
	if cfg.OutBytes <= 0 {
		cfg.OutBytes = DefaultOutBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &Mux{cfg: cfg, log: cfg.Logger, conn: conn, out: make(chan []byte, writeQueue),
		done: make(chan struct{}), pending: map[uint32]*call{}, sessions: map[string]*Client{},
		clients: map[*Client]struct{}{}}
	m.wg.Add(2)
	go func() { // owner: the Mux (wg); exits when the connection ends or the mux closes
		defer m.wg.Done()
		m.fail(m.reader())
	}()
	go func() { // owner: the Mux (wg); exits when the mux ends or a write fails
		defer m.wg.Done()
		m.writer()
	}()
	return m
}

// Done is closed once the mux has ended; Err says why.
func (m *Mux) Done() <-chan struct{} { return m.done }

// Err is why the mux ended (nil while it runs).
func (m *Mux) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Clients is how many clients are open.
func (m *Mux) Clients() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.clients)
}

// Close ends the mux, every client and the connection, and waits for its goroutines. The
// open clients' browser sessions are detached first (briefly waited for), so that a browser
// that outlives the connection sends nothing for them to the next one.
func (m *Mux) Close() error {
	m.mu.Lock()
	var roots []string
	if m.err == nil {
		for c := range m.clients {
			roots = append(roots, c.root)
		}
	}
	m.mu.Unlock()
	if len(roots) > 0 {
		// Best effort, bounded: the detaches are written (not just queued) before the
		// connection closes, unless the browser stops reading.
		ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
		for _, sid := range roots {
			m.call(ctx, "Target.detachFromTarget", "", map[string]string{"sessionId": sid}, false)
		}
		for m.unwritten() > 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}
	m.fail(ErrClosed)
	m.wg.Wait()
	return nil
}

// fail ends the mux with err (the first error wins) and closes the clients.
func (m *Mux) fail(err error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = ErrBrowserGone
	}
	m.err = err
	clients := m.clients
	m.clients = map[*Client]struct{}{}
	m.pending = map[uint32]*call{}
	m.sessions = map[string]*Client{}
	close(m.done)
	m.mu.Unlock()
	m.conn.Close()
	for c := range clients {
		c.end(err)
	}
}

func (m *Mux) writer() {
	for {
		select {
		case b := <-m.out:
			err := WriteMessage(m.conn, b)
			m.outRelease(len(b))
			if err != nil {
				m.fail(fmt.Errorf("%w: write: %v", ErrBrowserGone, err))
				return
			}
		case <-m.done:
			return
		}
	}
}

func (m *Mux) reader() error {
	br := bufio.NewReaderSize(m.conn, 64<<10)
	for {
		b, err := ReadMessage(br, m.cfg.MaxMessage)
		if errors.Is(err, ErrTooLarge) {
			m.drop("over the size limit", err)
			continue
		}
		if err != nil {
			select {
			case <-m.done:
				return nil
			default:
			}
			return fmt.Errorf("%w: %v", ErrBrowserGone, err)
		}
		if err := m.fromBrowser(b); err != nil {
			return err
		}
	}
}

// drop logs a dropped message from the browser (rate-limited).
func (m *Mux) drop(why string, err error) {
	m.mu.Lock()
	m.dropLocked(why, err)
	m.mu.Unlock()
}

func (m *Mux) dropLocked(why string, err error) {
	m.dropped++
	if n := m.dropped; n <= 10 || n%1000 == 0 {
		m.log.Warn("cdpmux: dropped a message from the browser", "why", why, "err", err, "dropped", n)
	}
}

// msg is one CDP message, its fields as they came.
type msg struct {
	ID        json.RawMessage `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
}

// DecodeBrowser parses one message from the browser; it is the fuzzed entry point of the
// untrusted side. A reply has an id (an integer in [0, 2^31)); an event has a method.
func DecodeBrowser(b []byte) (*msg, uint32, error) {
	if !utf8.Valid(b) {
		return nil, 0, errors.New("not UTF-8")
	}
	var x msg
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, 0, err
	}
	if len(x.SessionID) > MaxSessionID {
		return nil, 0, fmt.Errorf("a sessionId of %d bytes (at most %d)", len(x.SessionID), MaxSessionID)
	}
	if x.ID == nil {
		if x.Method == "" {
			return nil, 0, errors.New("neither a reply (id) nor an event (method)")
		}
		return &x, 0, nil
	}
	id, err := strconv.ParseUint(string(x.ID), 10, 31)
	if err != nil {
		return nil, 0, fmt.Errorf("bad id %.40q", x.ID)
	}
	if x.Result == nil && x.Error == nil {
		return nil, 0, errors.New("a reply without result or error")
	}
	return &x, uint32(id), nil
}

// decodeClient parses one call from a client.
func decodeClient(b []byte) (*msg, error) {
	var x msg
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMessage, err)
	}
	if x.ID == nil || x.Method == "" {
		return nil, ErrBadMessage
	}
	if _, err := strconv.ParseInt(string(x.ID), 10, 64); err != nil {
		return nil, fmt.Errorf("%w: id %.40s", ErrBadMessage, x.ID)
	}
	return &x, nil
}

// encode writes a message with the given fields (raw ones as they are).
func encode(id []byte, method, sessionID string, params, result, errv json.RawMessage) []byte {
	b := make([]byte, 0, 64+len(params)+len(result)+len(errv))
	b = append(b, '{')
	sep := func(name string) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	quote := func(s string) {
		q, _ := json.Marshal(s)
		b = append(b, q...)
	}
	if id != nil {
		sep("id")
		b = append(b, id...)
	}
	if method != "" {
		sep("method")
		quote(method)
	}
	if params != nil {
		sep("params")
		b = append(b, params...)
	}
	if result != nil {
		sep("result")
		b = append(b, result...)
	}
	if errv != nil {
		sep("error")
		b = append(b, errv...)
	}
	if sessionID != "" {
		sep("sessionId")
		quote(sessionID)
	}
	return append(b, '}')
}

// cdpError is a CDP error object.
func cdpError(code int, message string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, message})
	return b
}

func (m *Mux) fromBrowser(b []byte) error {
	x, id, err := DecodeBrowser(b)
	if err != nil {
		m.drop("malformed", err)
		return nil
	}
	if x.ID != nil {
		m.reply(x, id)
		return nil
	}
	if x.SessionID == "" && m.cfg.ExitMethod != "" && x.Method == m.cfg.ExitMethod {
		var p struct {
			Message string `json:"message"`
		}
		json.Unmarshal(x.Params, &p)
		// The text comes from the sandbox: bounded, printable, one line (it reaches logs,
		// audit and WebSocket close reasons).
		msg := strings.Map(func(r rune) rune {
			if unicode.IsControl(r) {
				return ' '
			}
			return r
		}, p.Message)
		if len(msg) > 1024 {
			n := 1024
			for n > 0 && !utf8.RuneStart(msg[n]) {
				n--
			}
			msg = msg[:n]
		}
		return fmt.Errorf("%w: %s", ErrBrowserGone, msg)
	}
	m.event(x)
	return nil
}

func (m *Mux) reply(x *msg, id uint32) {
	m.mu.Lock()
	c, ok := m.pending[id]
	if !ok {
		m.mu.Unlock()
		// Usually a reply to a client that has left since; counted with the drops.
		m.mu.Lock()
		m.dropped++
		m.mu.Unlock()
		m.log.Debug("cdpmux: dropped a reply to an unknown id", "id", id)
		return
	}
	delete(m.pending, id)
	if c.client != nil {
		c.client.inFlight--
		// A flattened session attached by this client's call is the client's.
		if x.Result != nil && (c.method == "Target.attachToTarget" || c.method == "Target.attachToBrowserTarget") {
			var r struct {
				SessionID string `json:"sessionId"`
			}
			if json.Unmarshal(x.Result, &r) == nil && r.SessionID != "" {
				m.ownLocked(c.client, r.SessionID)
			}
		}
	}
	m.mu.Unlock()
	if c.client == nil {
		c.reply <- x // buffered, one reply
		return
	}
	// The reply names the session the client called, whatever the browser says: a client
	// never sees a session id it did not use.
	c.client.push(encode(c.clientID, "", c.session, nil, x.Result, x.Error))
}

// ownLocked records session sid as c's (bounded per client).
func (m *Mux) ownLocked(c *Client, sid string) {
	if len(sid) > MaxSessionID {
		m.dropLocked("a session id over the length limit", fmt.Errorf("%d bytes", len(sid)))
		return
	}
	if owner, ok := m.sessions[sid]; ok {
		if owner != c {
			m.dropLocked("a session id already owned by another client", nil)
		}
		return
	}
	if len(c.sessions) >= m.cfg.MaxSessions {
		m.dropLocked("a client at its session limit: a new session is not routed",
			fmt.Errorf("client %s, limit %d", c.name, m.cfg.MaxSessions))
		return
	}
	m.sessions[sid] = c
	c.sessions[sid] = struct{}{}
}

func (m *Mux) event(x *msg) {
	if x.SessionID == "" {
		switch x.Method {
		case "Target.detachedFromTarget", "Target.attachedToTarget":
			// At the root these concern the clients' browser sessions (the mux's root
			// connection attaches nothing else): the mux's own business, never shown to a
			// client (it would name another client's session). A client whose browser
			// session the browser detached has ended.
			m.rootTargetEvent(x)
			return
		}
		m.mu.Lock()
		clients := make([]*Client, 0, len(m.clients))
		for c := range m.clients {
			clients = append(clients, c)
		}
		m.mu.Unlock()
		b := encode(nil, x.Method, "", x.Params, nil, nil)
		for _, c := range clients {
			c.push(b)
		}
		return
	}
	m.mu.Lock()
	c, ok := m.sessions[x.SessionID]
	if !ok {
		m.mu.Unlock()
		m.drop("an event of an unknown session", fmt.Errorf("%s", x.Method))
		return
	}
	switch x.Method {
	case "Target.attachedToTarget":
		var p struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal(x.Params, &p) == nil && p.SessionID != "" {
			m.ownLocked(c, p.SessionID)
		}
	case "Target.detachedFromTarget":
		m.detachedLocked(c, x.Params)
	}
	m.mu.Unlock()
	sid := x.SessionID
	if sid == c.root {
		sid = ""
	}
	c.push(encode(nil, x.Method, sid, x.Params, nil, nil))
}

// ErrDetached ends a client whose browser session the browser detached.
var ErrDetached = errors.New("the browser detached this client's session")

func (m *Mux) rootTargetEvent(x *msg) {
	if x.Method != "Target.detachedFromTarget" {
		return
	}
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(x.Params, &p) != nil || p.SessionID == "" {
		return
	}
	m.mu.Lock()
	c, ok := m.sessions[p.SessionID]
	if ok && c.root != p.SessionID {
		// One of a client's own sessions: forget it (Chromium reports those on the client's
		// session, so this is a confused or hostile browser).
		delete(m.sessions, p.SessionID)
		delete(c.sessions, p.SessionID)
		ok = false
	}
	m.mu.Unlock()
	if ok {
		c.closeWith(ErrDetached)
	}
}

// detachedLocked forgets the session a Target.detachedFromTarget event names: on a session
// of client by, only one of by's own (an event on one client's session never unroutes
// another's); at the root (by nil), any but a client's browser session.
func (m *Mux) detachedLocked(by *Client, params json.RawMessage) {
	var p struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(params, &p) != nil || p.SessionID == "" {
		return
	}
	if c, ok := m.sessions[p.SessionID]; ok && (by == nil || c == by) && p.SessionID != c.root {
		delete(m.sessions, p.SessionID)
		delete(c.sessions, p.SessionID)
	}
}

// call sends one call of the mux's own and, if wait, waits for its reply.
func (m *Mux) call(ctx context.Context, method, sessionID string, params any, wait bool) (*msg, error) {
	var raw json.RawMessage
	if params != nil {
		raw, _ = json.Marshal(params)
	}
	c := &call{method: method, reply: make(chan *msg, 1)}
	m.mu.Lock()
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		return nil, err
	}
	id := m.newIDLocked()
	if wait {
		m.pending[id] = c
	}
	m.mu.Unlock()
	b := encode([]byte(strconv.FormatUint(uint64(id), 10)), method, sessionID, raw, nil, nil)
	if err := m.enqueue(ctx, b); err != nil {
		m.forget(id)
		return nil, err
	}
	if !wait {
		return nil, nil
	}
	select {
	case r := <-c.reply:
		if r.Error != nil {
			return r, fmt.Errorf("%s: %s", method, r.Error)
		}
		return r, nil
	case <-m.done:
		return nil, m.Err()
	case <-ctx.Done():
		m.forget(id)
		return nil, context.Cause(ctx)
	}
}

func (m *Mux) forget(id uint32) {
	m.mu.Lock()
	if c, ok := m.pending[id]; ok {
		delete(m.pending, id)
		if c.client != nil {
			c.client.inFlight--
		}
	}
	m.mu.Unlock()
}

// newIDLocked returns an id in [1, 2^31) not in flight (Chromium's ids are 32-bit ints).
func (m *Mux) newIDLocked() uint32 {
	for {
		m.nextID++
		if m.nextID >= 1<<31 {
			m.nextID = 1
		}
		if _, busy := m.pending[m.nextID]; !busy {
			return m.nextID
		}
	}
}

// enqueue queues b for the writer, waiting while the queued calls are over Config.OutBytes
// (one call always fits).
func (m *Mux) enqueue(ctx context.Context, b []byte) error {
	for {
		m.outMu.Lock()
		if m.outBytes == 0 || m.outBytes+len(b) <= m.cfg.OutBytes {
			m.outBytes += len(b)
			m.outMu.Unlock()
			break
		}
		if m.outFreed == nil {
			m.outFreed = make(chan struct{})
		}
		freed := m.outFreed
		m.outMu.Unlock()
		select {
		case <-freed:
		case <-m.done:
			return m.Err()
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	select {
	case m.out <- b:
		return nil
	case <-m.done:
		m.outRelease(len(b))
		return m.Err()
	case <-ctx.Done():
		m.outRelease(len(b))
		return context.Cause(ctx)
	}
}

// unwritten is how many bytes are queued for the browser and not yet written.
func (m *Mux) unwritten() int {
	m.outMu.Lock()
	defer m.outMu.Unlock()
	return m.outBytes
}

// outRelease returns n bytes of the writer's budget and wakes the senders waiting for it.
func (m *Mux) outRelease(n int) {
	m.outMu.Lock()
	m.outBytes -= n
	if m.outFreed != nil {
		close(m.outFreed)
		m.outFreed = nil
	}
	m.outMu.Unlock()
}

// Client is one CDP client's share of the browser (safe for concurrent use).
type Client struct {
	m      *Mux
	name   string
	root   string // the client's browser-level session
	filter func(method string, params json.RawMessage) error

	// Under m.mu:
	inFlight int
	sessions map[string]struct{}

	qmu    sync.Mutex
	queue  [][]byte
	qbytes int
	notify chan struct{} // 1-buffered: the queue changed
	err    error         // set once the client ended
	closed chan struct{}
}

// NewClient opens a client named name (for logs); filter, if set, may refuse a call by its
// method and params (the error's text goes back to the client as a CDP error; the call is
// not sent).
func (m *Mux) NewClient(ctx context.Context, name string, filter func(method string, params json.RawMessage) error) (*Client, error) {
	m.mu.Lock()
	if len(m.clients)+m.opening >= m.cfg.MaxClients {
		m.mu.Unlock()
		return nil, fmt.Errorf("%w (%d): close one first", ErrTooManyClients, m.cfg.MaxClients)
	}
	m.opening++ // counted until the client is open or failed: concurrent NewClients stay under MaxClients
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		m.opening--
		m.mu.Unlock()
	}()
	c := &Client{m: m, name: name, filter: filter, sessions: map[string]struct{}{},
		notify: make(chan struct{}, 1), closed: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, attachTimeout)
	defer cancel()
	r, err := m.call(ctx, "Target.attachToBrowserTarget", "", nil, true)
	if err != nil {
		return nil, fmt.Errorf("attach a browser session: %w", err)
	}
	var res struct {
		SessionID string `json:"sessionId"`
	}
	if json.Unmarshal(r.Result, &res) != nil || res.SessionID == "" {
		return nil, errors.New("attach a browser session: no sessionId in the reply")
	}
	c.root = res.SessionID
	m.mu.Lock()
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		return nil, err
	}
	if _, taken := m.sessions[c.root]; taken {
		m.mu.Unlock()
		return nil, errors.New("attach a browser session: the browser returned a session id in use")
	}
	m.sessions[c.root] = c
	m.clients[c] = struct{}{}
	m.mu.Unlock()
	return c, nil
}

// Name is the client's name.
func (c *Client) Name() string { return c.name }

// Done is closed once the client has ended.
func (c *Client) Done() <-chan struct{} { return c.closed }

// Err is why the client ended (nil while open).
func (c *Client) Err() error {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return c.err
}

// Refused says why method may not be called by any client of a shared browser ("" = it
// may). The agent owns its browser, so almost every method is its to call (navigation to
// file:// shows the sandbox's own files, downloads land in the sandbox, Storage and
// SystemInfo describe its own browser); refused are those that end the browser for the
// others, open a TCP port (CDP is on a pipe and no port is ever opened) or hand CDP to web
// content. docs/browser-cdp.md lists them.
func Refused(method string) string {
	switch method {
	case "Browser.crash", "Browser.crashGpuProcess":
		return "the browser is shared with the live view and the other clients"
	case "Tethering.bind", "Tethering.unbind":
		return "it opens a TCP port in the sandbox, and no port is ever opened for the browser (CDP is on a pipe)"
	case "Target.exposeDevToolsProtocol":
		return "it would give the page's scripts (any web content) a CDP connection of their own"
	}
	return ""
}

// push queues b for the client, closing the client if its queue overflows, and closing the
// mux's client with the longest queue if all queues together are over MuxQueueBytes.
func (c *Client) push(b []byte) {
	m := c.m
	if m.queued.Load()+int64(len(b)) > int64(m.cfg.MuxQueueBytes) {
		if v := m.longestQueue(); v != nil {
			m.log.Warn("cdpmux: the clients' queues together are over the limit; closing the client with the longest",
				"client", v.name, "limit", m.cfg.MuxQueueBytes)
			v.closeWith(ErrSlowClient)
		}
	}
	c.qmu.Lock()
	if c.err != nil {
		c.qmu.Unlock()
		return
	}
	if len(c.queue) > 0 && (len(c.queue) >= c.m.cfg.QueueMessages || c.qbytes+len(b) > c.m.cfg.QueueBytes) {
		c.qmu.Unlock()
		c.m.log.Warn("cdpmux: a slow client overflowed its queue; closing it", "client", c.name,
			"messages", c.m.cfg.QueueMessages, "bytes", c.m.cfg.QueueBytes)
		c.closeWith(ErrSlowClient)
		return
	}
	c.queue = append(c.queue, b)
	c.qbytes += len(b)
	m.queued.Add(int64(len(b)))
	c.qmu.Unlock()
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// Send sends one CDP call (the client's own id, and optionally one of its sessions).
func (c *Client) Send(ctx context.Context, b []byte) error {
	if len(b) > c.m.cfg.MaxMessage {
		return fmt.Errorf("cdp call of %d bytes: over the %d-byte limit", len(b), c.m.cfg.MaxMessage)
	}
	x, err := decodeClient(b)
	if err != nil {
		return err
	}
	if err := c.Err(); err != nil {
		return err
	}
	answer := func(result, errv json.RawMessage) error {
		c.push(encode(x.ID, "", x.SessionID, nil, result, errv))
		return nil
	}
	switch x.Method {
	case "Browser.close":
		// The browser is shared with other clients (and the people watching): closing the
		// connection is this client's way to leave.
		return answer(json.RawMessage(`{}`), nil)
	}
	if err := c.allowed(x.Method, x.Params); err != nil {
		return answer(nil, cdpError(-32000, err.Error()))
	}
	if x.Method == "Target.sendMessageToTarget" {
		// A call carried inside (a session attached with flatten: false) obeys the same rules.
		var p struct {
			Message string `json:"message"`
		}
		var inner struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(x.Params, &p) == nil && json.Unmarshal([]byte(p.Message), &inner) == nil && inner.Method != "" {
			if err := c.allowed(inner.Method, inner.Params); err != nil {
				return answer(nil, cdpError(-32000, err.Error()))
			}
		}
	}
	m := c.m
	sid := x.SessionID
	m.mu.Lock()
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		return err
	}
	if sid == "" {
		sid = c.root
	} else if _, ok := c.sessions[sid]; !ok {
		m.mu.Unlock()
		// As Chromium answers a call to a session it does not know: at the root, so that the
		// reply names no session the client does not own.
		c.push(encode(x.ID, "", "", nil, nil, cdpError(-32001, "Session with given id not found.")))
		return nil
	}
	if c.inFlight >= m.cfg.MaxPending {
		m.mu.Unlock()
		return answer(nil, cdpError(-32000, fmt.Sprintf("porthole: too many calls in flight (%d): wait for replies", m.cfg.MaxPending)))
	}
	id := m.newIDLocked()
	m.pending[id] = &call{client: c, clientID: x.ID, session: x.SessionID, method: x.Method}
	c.inFlight++
	m.mu.Unlock()
	out := encode([]byte(strconv.FormatUint(uint64(id), 10)), x.Method, sid, x.Params, nil, nil)
	if err := m.enqueue(ctx, out); err != nil {
		m.forget(id)
		return err
	}
	return nil
}

// allowed applies Refused and the client's filter to one call.
func (c *Client) allowed(method string, params json.RawMessage) error {
	if why := Refused(method); why != "" {
		return fmt.Errorf("porthole: %s is not allowed: %s", method, why)
	}
	if c.filter != nil {
		return c.filter(method, params)
	}
	return nil
}

// Recv returns the next reply or event for the client.
func (c *Client) Recv(ctx context.Context) ([]byte, error) {
	for {
		c.qmu.Lock()
		if len(c.queue) > 0 {
			b := c.queue[0]
			c.queue[0] = nil
			c.queue = c.queue[1:]
			c.qbytes -= len(b)
			c.m.queued.Add(-int64(len(b)))
			c.qmu.Unlock()
			return b, nil
		}
		err := c.err
		c.qmu.Unlock()
		if err != nil {
			return nil, err
		}
		select {
		case <-c.notify:
		case <-c.closed:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// longestQueue is the open client holding the most queued bytes (nil if none holds any).
func (m *Mux) longestQueue() *Client {
	m.mu.Lock()
	clients := make([]*Client, 0, len(m.clients))
	for c := range m.clients {
		clients = append(clients, c)
	}
	m.mu.Unlock()
	var v *Client
	most := 0
	for _, c := range clients {
		c.qmu.Lock()
		n := c.qbytes
		c.qmu.Unlock()
		if n > most {
			v, most = c, n
		}
	}
	return v
}

// Close detaches the client; the browser goes on for the others.
func (c *Client) Close() error {
	c.closeWith(ErrClosed)
	return nil
}

// end marks the client ended: when the browser went away, Recv returns what was queued,
// then err; otherwise (closed, too slow) the backlog is dropped at once.
func (c *Client) end(err error) bool {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	if c.err != nil {
		return false
	}
	c.err = err
	if !errors.Is(err, ErrBrowserGone) {
		c.m.queued.Add(-int64(c.qbytes))
		c.queue, c.qbytes = nil, 0
	}
	close(c.closed)
	return true
}

// closeWith ends the client with err, forgets its calls and sessions, and detaches its
// sessions in the browser.
func (c *Client) closeWith(err error) {
	if !c.end(err) {
		return
	}
	m := c.m
	m.mu.Lock()
	_, open := m.clients[c]
	delete(m.clients, c)
	idle := open && len(m.clients) == 0 && m.err == nil
	if m.err == nil {
		for id, p := range m.pending {
			if p.client == c {
				delete(m.pending, id)
			}
		}
		for sid := range c.sessions {
			if owner := m.sessions[sid]; owner == c {
				delete(m.sessions, sid)
			}
		}
		delete(m.sessions, c.root)
	}
	c.sessions = map[string]struct{}{}
	m.mu.Unlock()
	if open && m.Err() == nil {
		// Detaching the client's browser session detaches the sessions attached through it
		// (Chromium keeps flattened sessions as children of the session that attached them).
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		m.call(ctx, "Target.detachFromTarget", "", map[string]string{"sessionId": c.root}, false)
		cancel()
	}
	if idle && m.cfg.OnIdle != nil {
		m.cfg.OnIdle()
	}
}
