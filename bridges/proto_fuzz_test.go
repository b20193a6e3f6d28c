package bridges

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/porthole/porthole/api"
)

// FuzzReadFrame feeds arbitrary bytes, as a compromised helper could send them, to the
// decoder of the gateway↔helper JSON frames: it must return an error or a value that
// survives a round trip, never panic or allocate past the frame bound.
func FuzzReadFrame(f *testing.F) {
	frame := func(v any) []byte {
		var b bytes.Buffer
		if err := WriteFrame(&b, v); err != nil {
			f.Fatal(err)
		}
		return b.Bytes()
	}
	f.Add(frame(Hello{Proto: ProtoVersion, PID: 2, UID: 1000, Limits: "rlimit"}))
	f.Add(frame(StreamHeader{Kind: StreamTerminal}))
	f.Add(frame(api.ExecResult{ExitCode: 1, Stdout: "hi\n", StderrTruncated: true}))
	f.Add(frame(api.ExecRequest{Command: []string{"sh", "-c", "true"}, TimeoutS: 3}))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})    // a length past the bound
	f.Add([]byte{0, 0, 0, 5, '{', '"', 'a'}) // truncated
	f.Add(binary.BigEndian.AppendUint32(nil, 2))

	f.Fuzz(func(t *testing.T, data []byte) {
		for _, target := range []any{&Hello{}, &StreamHeader{}, &api.ExecResult{}, &api.ExecRequest{}} {
			err := ReadFrame(bytes.NewReader(data), target)
			if err != nil {
				if len(data) >= 4 && binary.BigEndian.Uint32(data) > maxFrame && !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("ReadFrame(%d-byte length) = %v, want ErrFrameTooLarge", binary.BigEndian.Uint32(data), err)
				}
				continue
			}
			var b bytes.Buffer
			if err := WriteFrame(&b, target); err != nil {
				t.Fatalf("WriteFrame(%#v) after a successful read: %v", target, err)
			}
			again := reflect.New(reflect.TypeOf(target).Elem()).Interface()
			if err := ReadFrame(&b, again); err != nil {
				t.Fatalf("round trip of %#v: %v", target, err)
			}
			if !reflect.DeepEqual(again, target) {
				t.Fatalf("round trip = %#v, want %#v", again, target)
			}
		}
	})
}
