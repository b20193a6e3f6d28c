package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"

	"github.com/labstack/echo/v4"

	"github.com/porthole/porthole/api"
)

// maxBodyBytes bounds every request body.
const maxBodyBytes = 1 << 20

// errorf is a client-facing error: status and message for the client; err (may be nil) only for the log.
func errorf(status int, err error, format string, args ...any) *echo.HTTPError {
	he := echo.NewHTTPError(status, fmt.Sprintf(format, args...))
	if err != nil {
		he.Internal = err
	}
	return he
}

// internalError hides err from the client and logs it.
func internalError(what string, err error) *echo.HTTPError {
	return errorf(http.StatusInternalServerError, fmt.Errorf("%s: %w", what, err), "internal error while %s", what)
}

// handleError is the Echo HTTPErrorHandler: every error becomes {"error": "..."} with a fitting
// status; the internal cause is logged, never sent.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status := http.StatusInternalServerError
	msg := "internal error"
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status = he.Code
		switch m := he.Message.(type) {
		case string:
			msg = m
		case error:
			msg = m.Error()
		default:
			msg = http.StatusText(status)
		}
		if status == http.StatusNotFound && msg == http.StatusText(http.StatusNotFound) {
			msg = "no such route"
		}
		if he.Internal != nil {
			err = he.Internal
		} else {
			err = nil
		}
	}
	if err != nil && status >= 500 {
		s.log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path,
			"status", status, "err", err)
	} else if err != nil {
		s.log.Debug("request refused", "method", c.Request().Method, "path", c.Request().URL.Path,
			"status", status, "err", err)
	}
	if c.Request().Method == http.MethodHead {
		c.NoContent(status)
		return
	}
	c.JSON(status, api.Error{Error: msg})
}

func writeJSONError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(api.Error{Error: msg})
}

// recoverPanic turns a handler's panic into a logged 500 instead of a dropped connection.
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				s.log.Error("panic in handler", "path", c.Request().URL.Path, "panic", r, "stack", string(debug.Stack()))
				err = errorf(http.StatusInternalServerError, fmt.Errorf("panic: %v", r), "internal error")
			}
		}()
		return next(c)
	}
}

// bodyLimit refuses bodies over maxBodyBytes with 413, whether announced or streamed.
func bodyLimit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > maxBodyBytes {
			return errorf(http.StatusRequestEntityTooLarge, nil, "request body too large (limit %d bytes)", maxBodyBytes)
		}
		if r.Body != nil {
			r.Body = http.MaxBytesReader(c.Response(), r.Body, maxBodyBytes)
		}
		return next(c)
	}
}

// decodeJSON reads exactly one JSON value into v, refusing unknown fields and trailing data.
func decodeJSON(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if dec.Decode(&struct{}{}) != io.EOF {
			return errorf(http.StatusBadRequest, nil, "invalid JSON body: trailing data after the object")
		}
		return nil
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errorf(http.StatusRequestEntityTooLarge, err, "request body too large (limit %d bytes)", maxBodyBytes)
	}
	if errors.Is(err, io.EOF) {
		return errorf(http.StatusBadRequest, err, "a JSON body is required")
	}
	return errorf(http.StatusBadRequest, err, "invalid JSON body: %v", err)
}
