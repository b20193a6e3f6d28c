package bridges

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseInheritedFDs marks every file descriptor above 2 close-on-exec, so that nothing the
// process inherited from its parent (an fd its caller left open) reaches a sandbox: the
// launchers pass only what they mean to (ExtraFiles). The gateway calls it first thing at
// startup, before any child is started. close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11),
// else each fd listed in /proc/self/fd.
func CloseInheritedFDs() error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("close inherited fds: %w", err)
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		unix.CloseOnExec(fd)
	}
	return nil
}
