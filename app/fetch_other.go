//go:build !(js && wasm)

package app

import (
	"bytes"
	"context"
	"io"
	"net/http"
)

// defaultRoundTrip outside the browser (tests, tools) uses http.DefaultClient.
var defaultRoundTrip = HTTPRoundTrip(http.DefaultClient)

// HTTPRoundTrip adapts a net/http client (e.g. one with a cookie jar) to RoundTripFunc.
func HTTPRoundTrip(hc *http.Client) RoundTripFunc {
	return func(ctx context.Context, method, url string, body []byte) (int, string, []byte, error) {
		var r io.Reader
		if body != nil {
			r = bytes.NewReader(body)
		}
		req, err := http.NewRequestWithContext(ctx, method, url, r)
		if err != nil {
			return 0, "", nil, err
		}
		req.Header.Set("Accept", "application/json")
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", nil, err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
		if err != nil {
			return 0, "", nil, err
		}
		return resp.StatusCode, resp.Header.Get("Retry-After"), data, nil
	}
}
