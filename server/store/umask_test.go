package store

import "syscall"

// umask sets the process umask and returns the previous one.
func umask(m int) int { return syscall.Umask(m) }
