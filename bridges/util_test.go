package bridges

import (
	"net"
	"syscall"

	"github.com/porthole/porthole/api"
)

func syscallKill0(pid int) error { return syscall.Kill(pid, 0) }

func syscallKillCont(pid int) { syscall.Kill(pid, syscall.SIGCONT) }

// hostIPs lists the host's non-loopback IPv4 addresses (a jail without network must reach none).
func hostIPs() []string {
	var out []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}

func apiLimits(pids int, memMiB int64) api.Limits { return api.Limits{Pids: pids, MemoryMiB: memMiB} }
