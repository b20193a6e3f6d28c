package cdpmux

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is returned by ReadMessage for a message over the limit; the reader has skipped
// it up to its terminating NUL and may read the next one.
var ErrTooLarge = errors.New("cdp message over the size limit")

// ReadMessage reads one NUL-terminated message (without the NUL) of at most max bytes. A
// longer message is skipped and ErrTooLarge returned; the stream stays usable. The returned
// slice is the caller's.
func ReadMessage(r *bufio.Reader, max int) ([]byte, error) {
	var msg []byte
	over := false
	for {
		chunk, err := r.ReadSlice(0)
		if !over {
			if len(msg)+len(chunk) > max+1 { // +1: the NUL
				over, msg = true, nil
			} else {
				msg = append(msg, chunk...)
			}
		}
		switch {
		case err == nil:
			if over {
				return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, max)
			}
			return msg[:len(msg)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && (len(msg) > 0 || over):
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// WriteMessage writes msg and its terminating NUL. msg must not contain a NUL (JSON never does).
func WriteMessage(w io.Writer, msg []byte) error {
	if bytes.IndexByte(msg, 0) >= 0 {
		return errors.New("cdp message contains a NUL byte")
	}
	buf := make([]byte, 0, len(msg)+1)
	_, err := w.Write(append(append(buf, msg...), 0))
	return err
}
