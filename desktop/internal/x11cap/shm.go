package x11cap

import (
	"fmt"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/shm"
	"golang.org/x/sys/unix"
)

// segment is one SysV shared-memory segment attached both here and in the X server, reused for every
// GetImage. It is marked for removal as soon as the server has attached it, so nothing leaks if this
// process dies: the kernel frees it when both sides have detached.
type segment struct {
	id   shm.Seg
	data []byte
}

// newSegment creates a segment of size bytes and attaches it to conn (read-write: the server writes).
func newSegment(conn *xgb.Conn, size int) (*segment, error) {
	shmid, err := unix.SysvShmGet(unix.IPC_PRIVATE, size, unix.IPC_CREAT|unix.IPC_EXCL|0o600)
	if err != nil {
		return nil, fmt.Errorf("shmget %d bytes: %w", size, err)
	}
	data, err := unix.SysvShmAttach(shmid, 0, 0)
	if err != nil {
		unix.SysvShmCtl(shmid, unix.IPC_RMID, nil)
		return nil, fmt.Errorf("shmat: %w", err)
	}
	seg, err := shm.NewSegId(conn)
	if err == nil {
		err = shm.AttachChecked(conn, seg, uint32(shmid), false).Check()
	}
	// Removal now: the segment lives while attached, and no id stays behind.
	unix.SysvShmCtl(shmid, unix.IPC_RMID, nil)
	if err != nil {
		unix.SysvShmDetach(data)
		return nil, fmt.Errorf("MIT-SHM attach: %w", err)
	}
	return &segment{id: seg, data: data}, nil
}

// close detaches the segment from the server (if the connection still lives) and from this process.
func (s *segment) close(conn *xgb.Conn) {
	if s == nil || s.data == nil {
		return
	}
	if conn != nil {
		shm.Detach(conn, s.id)
	}
	unix.SysvShmDetach(s.data)
	s.data = nil
}
