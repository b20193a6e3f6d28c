//go:build !js

package browser

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
)

// cdpCaller speaks CDP JSON on one cdpClient for the live view: calls that wait for their
// reply, sends that do not (acks, input), and events handed to onEvent on the reader
// goroutine. Its reader is run (owner: the view hub, which waits for it).
//
// Everything Chromium says is untrusted (it runs in the agent's sandbox): replies to ids we
// never sent, or sent and gave up on, are dropped; the waiting map holds only our own ids.
type cdpCaller struct {
	c       cdpClient
	onEvent func(ev cdpEvent)

	smu sync.Mutex // serialises Send

	mu      sync.Mutex
	nextID  int64
	waiting map[int64]chan cdpReply
	err     error // set once the reader ended
}

// cdpEvent is one event from Chromium.
type cdpEvent struct {
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	SessionID string          `json:"sessionId"`
}

type cdpReply struct {
	result json.RawMessage
	err    error
}

// cdpMessage is any message from Chromium.
type cdpMessage struct {
	ID        *int64          `json:"id"`
	Result    json.RawMessage `json:"result"`
	Error     *cdpError       `json:"error"`
	Method    string          `json:"method"`
	Params    json.RawMessage `json:"params"`
	SessionID string          `json:"sessionId"`
}

// cdpError is a CDP error reply.
type cdpError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
}

func (e *cdpError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

// errCDPGone: the CDP client ended (the browser crashed or stopped, or the view closed it).
var errCDPGone = errors.New("the browser connection ended")

func newCDPCaller(c cdpClient, onEvent func(cdpEvent)) *cdpCaller {
	return &cdpCaller{c: c, onEvent: onEvent, waiting: map[int64]chan cdpReply{}}
}

// run reads until the client fails, then fails every waiting call.
func (c *cdpCaller) run(ctx context.Context) error {
	var err error
	for {
		var b []byte
		b, err = c.c.Recv(ctx)
		if err != nil {
			break
		}
		var m cdpMessage
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		if m.ID != nil {
			c.mu.Lock()
			ch := c.waiting[*m.ID]
			delete(c.waiting, *m.ID)
			c.mu.Unlock()
			if ch != nil {
				r := cdpReply{result: m.Result}
				if m.Error != nil {
					r.err = m.Error
				}
				ch <- r // buffered (1), one reply per waiter
			}
			continue
		}
		if m.Method != "" && c.onEvent != nil {
			c.onEvent(cdpEvent{Method: m.Method, Params: m.Params, SessionID: m.SessionID})
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %v", errCDPGone, err)
	for id, ch := range c.waiting {
		ch <- cdpReply{err: c.err}
		delete(c.waiting, id)
	}
	c.mu.Unlock()
	return c.err
}

func (c *cdpCaller) encode(id int64, session, method string, params any) ([]byte, error) {
	if params == nil {
		params = struct{}{}
	}
	return json.Marshal(struct {
		ID        int64  `json:"id"`
		Method    string `json:"method"`
		Params    any    `json:"params"`
		SessionID string `json:"sessionId,omitempty"`
	}{id, method, params, session})
}

func (c *cdpCaller) write(ctx context.Context, b []byte) error {
	c.smu.Lock()
	defer c.smu.Unlock()
	return c.c.Send(ctx, b)
}

// send sends a command without waiting for its reply (which the reader drops).
func (c *cdpCaller) send(ctx context.Context, session, method string, params any) error {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	b, err := c.encode(id, session, method, params)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if err := c.write(ctx, b); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	return nil
}

// call sends a command and waits for its reply, decoded into result (if not nil).
func (c *cdpCaller) call(ctx context.Context, session, method string, params, result any) error {
	ch := make(chan cdpReply, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.nextID++
	id := c.nextID
	c.waiting[id] = ch
	c.mu.Unlock()
	forget := func() {
		c.mu.Lock()
		delete(c.waiting, id)
		c.mu.Unlock()
	}
	b, err := c.encode(id, session, method, params)
	if err == nil {
		err = c.write(ctx, b)
	}
	if err != nil {
		forget()
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return fmt.Errorf("%s: %w", method, r.err)
		}
		if result != nil && len(r.result) > 0 {
			if err := json.Unmarshal(r.result, result); err != nil {
				return fmt.Errorf("%s: decode reply: %w", method, err)
			}
		}
		return nil
	case <-ctx.Done():
		forget()
		return fmt.Errorf("%s: %w", method, context.Cause(ctx))
	}
}
