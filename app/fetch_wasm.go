//go:build js && wasm

package app

import (
	"context"
	"errors"
	"syscall/js"
)

// defaultRoundTrip uses the browser's Fetch API: same origin, with the session cookie.
func defaultRoundTrip(ctx context.Context, method, url string, body []byte) (int, string, []byte, error) {
	headers := map[string]any{"Accept": "application/json"}
	opts := map[string]any{
		"method":      method,
		"credentials": "same-origin",
		"mode":        "same-origin",
		"cache":       "no-store",
		"headers":     headers,
	}
	if body != nil {
		headers["Content-Type"] = "application/json"
		opts["body"] = string(body)
	}
	abort := js.Global().Get("AbortController").New()
	opts["signal"] = abort.Get("signal")
	stop := context.AfterFunc(ctx, func() { abort.Call("abort") })
	defer stop()

	resp, err := await(ctx, js.Global().Call("fetch", url, js.ValueOf(opts)))
	if err != nil {
		return 0, "", nil, err
	}
	status := resp.Get("status").Int()
	retryAfter := ""
	if v := resp.Get("headers").Call("get", "Retry-After"); v.Truthy() {
		retryAfter = v.String()
	}
	text, err := await(ctx, resp.Call("text"))
	if err != nil {
		return 0, "", nil, err
	}
	s := text.String()
	if len(s) > maxResponse {
		return 0, "", nil, errors.New("answer too large")
	}
	return status, retryAfter, []byte(s), nil
}

// await waits for a JS promise; the caller's goroutine blocks, the page's event loop does not.
func await(ctx context.Context, promise js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	done := make(chan result, 1)
	onOK := js.FuncOf(func(this js.Value, args []js.Value) any {
		done <- result{v: args[0]}
		return nil
	})
	onErr := js.FuncOf(func(this js.Value, args []js.Value) any {
		msg := "request failed"
		if len(args) > 0 && args[0].Truthy() {
			msg = args[0].Call("toString").String()
		}
		done <- result{err: errors.New(msg)}
		return nil
	})
	defer onOK.Release()
	defer onErr.Release()
	promise.Call("then", onOK, onErr)
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		return js.Value{}, ctx.Err()
	}
}
