package bridges

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"slices"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The jail's seccomp filter: a classic BPF program generated here (pure Go) and handed to bwrap
// with --seccomp FD, which installs it with no_new_privs right before it executes the helper, so
// it binds the helper and everything it starts. It is default-allow: it denies the known escape
// and kernel-attack surface, each with EPERM (not a kill) so that programs see a clear error:
//
//   - a syscall of another ABI (i386 on x86-64, x32) kills the process (their numbers differ);
//   - ptrace, process_vm_readv/writev, pidfd_getfd: no reading or steering another process
//     (the helper runs as the agent's uid);
//   - keyctl, add_key, request_key, bpf, userfaultfd, perf_event_open: kernel attack surface;
//   - the mount family, unshare, setns, and clone with namespace flags: no new namespaces
//     (clone3 returns ENOSYS, its flags being out of reach in memory, and libc falls back to clone);
//   - kernel modules, kexec, reboot, swap, acct, open_by_handle_at;
//   - personality other than the plain Linux ones (no ASLR switch-off);
//   - ioctl TIOCSTI and TIOCLINUX (typing into the terminal of someone else);
//   - chmod/fchmod/fchmodat/fchmodat2, open/openat/creat and mknod/mknodat with S_ISUID or S_ISGID
//     in the mode, and mknod of character or block devices: no setuid file ever appears in the
//     home on the host (openat2 returns ENOSYS, its mode being in memory).
//
// The mode checks look at the mode argument whatever the open flags (libc passes 0 when it does
// not create). The filter covers x86-64 and aarch64; on another architecture no filter is made.

// seccomp return values and the seccomp_data layout.
const (
	secRetKillProcess = 0x80000000
	secRetErrno       = 0x00050000
	secRetAllow       = 0x7fff0000
	secOffNr          = 0
	secOffArch        = 4
	secOffArgs        = 16

	auditArchX86_64  = 0xc000003e
	auditArchAArch64 = 0xc00000b7
	x32SyscallBit    = 0x40000000

	ePERM  = 1
	eNOSYS = 38
)

// seccompArch is one architecture's audit arch and syscall numbers (absent = no such call).
type seccompArch struct {
	audit uint32
	x32   bool // reject numbers with the x32 bit
	nr    map[string]uint32
}

var seccompArches = map[string]seccompArch{
	"amd64": {audit: auditArchX86_64, x32: true, nr: map[string]uint32{
		"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
		"keyctl": 250, "add_key": 248, "request_key": 249, "bpf": 321, "userfaultfd": 323, "perf_event_open": 298,
		"mount": 165, "umount2": 166, "pivot_root": 155, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
		"move_mount": 429, "open_tree": 428, "open_tree_attr": 467, "mount_setattr": 442, "unshare": 272, "setns": 308,
		"init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
		"reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "open_by_handle_at": 304,
		"clone3": 435, "openat2": 437, "clone": 56, "personality": 135, "ioctl": 16,
		"chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "open": 2, "openat": 257, "creat": 85,
		"mknod": 133, "mknodat": 259,
	}},
	"arm64": {audit: auditArchAArch64, nr: map[string]uint32{
		"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
		"keyctl": 219, "add_key": 217, "request_key": 218, "bpf": 280, "userfaultfd": 282, "perf_event_open": 241,
		"mount": 40, "umount2": 39, "pivot_root": 41, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
		"move_mount": 429, "open_tree": 428, "open_tree_attr": 467, "mount_setattr": 442, "unshare": 97, "setns": 268,
		"init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104, "kexec_file_load": 294,
		"reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89, "open_by_handle_at": 265,
		"clone3": 435, "openat2": 437, "clone": 220, "personality": 92, "ioctl": 29,
		"fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "openat": 56, "mknodat": 33,
	}},
}

// seccompDenied are refused outright with EPERM.
var seccompDenied = []string{
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	"keyctl", "add_key", "request_key", "bpf", "userfaultfd", "perf_event_open",
	"mount", "umount2", "pivot_root", "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree",
	"open_tree_attr", "mount_setattr", "unshare", "setns",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
	"reboot", "swapon", "swapoff", "acct", "open_by_handle_at",
}

// seccompNoSys return ENOSYS: their arguments are in memory, where the filter cannot look;
// libc falls back to the older call, which is checked.
var seccompNoSys = []string{"clone3", "openat2"}

// seccompModeArg: calls refused when their mode argument (index) has S_ISUID or S_ISGID.
var seccompModeArg = []struct {
	name string
	arg  int
}{
	{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2},
	{"open", 2}, {"openat", 3}, {"creat", 1},
}

// seccompMknod: mknod calls and their mode argument; also refused for devices.
var seccompMknod = []struct {
	name string
	arg  int
}{{"mknod", 1}, {"mknodat", 2}}

const (
	sISUID      = 0o4000
	sISGID      = 0o2000
	sIFMT       = 0o170000
	sIFCHR      = 0o020000
	sIFBLK      = 0o060000
	cloneNSMask = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 // NEWNS NEWCGROUP NEWUTS NEWIPC NEWUSER NEWPID NEWNET
	tiocSTI     = 0x5412
	tiocLINUX   = 0x541c
)

// personalityAllowed are the personas a jail may switch to (as Docker's default profile):
// PER_LINUX, PER_LINUX32, UNAME26 variants, and the query 0xffffffff.
var personalityAllowed = []uint32{0, 0x8, 0x20000, 0x20008, 0xffffffff}

// seccompFilter assembles the filter for arch (a GOARCH).
func seccompFilter(arch string) ([]bpf.RawInstruction, error) {
	a, ok := seccompArches[arch]
	if !ok {
		return nil, fmt.Errorf("seccomp: no syscall table for %s", arch)
	}
	ret := func(v uint32) bpf.Instruction { return bpf.RetConstant{Val: v} }
	eperm, allow := ret(secRetErrno|ePERM), ret(secRetAllow)
	argLo := func(i int) bpf.Instruction { return bpf.LoadAbsolute{Off: uint32(secOffArgs + 8*i), Size: 4} }
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: secOffArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.audit, SkipTrue: 1},
		ret(secRetKillProcess),
		bpf.LoadAbsolute{Off: secOffNr, Size: 4},
	}
	if a.x32 {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1}, ret(secRetKillProcess))
	}
	// Each call: "jeq nr" over a block that ends in a return, so A still holds nr past it.
	call := func(name string, block ...bpf.Instruction) {
		nr, ok := a.nr[name]
		if !ok {
			return
		}
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: uint8(len(block))})
		prog = append(prog, block...)
	}
	for _, name := range seccompDenied {
		call(name, eperm)
	}
	for _, name := range seccompNoSys {
		call(name, ret(secRetErrno|eNOSYS))
	}
	call("clone", argLo(0), bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: cloneNSMask, SkipFalse: 1}, eperm, allow)
	for _, m := range seccompModeArg {
		call(m.name, argLo(m.arg), bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: sISUID | sISGID, SkipFalse: 1}, eperm, allow)
	}
	for _, m := range seccompMknod {
		call(m.name, argLo(m.arg),
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: sISUID | sISGID, SkipTrue: 4},
			bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sIFMT},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: sIFCHR, SkipTrue: 2},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: sIFBLK, SkipTrue: 1},
			allow, eperm)
	}
	call("ioctl", argLo(1),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: tiocSTI, SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: tiocLINUX, SkipTrue: 1},
		allow, eperm)
	pers := []bpf.Instruction{argLo(0)}
	for i, v := range personalityAllowed {
		// Allowed values jump to the "allow" after the list; the fall-through is EPERM.
		pers = append(pers, bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(len(personalityAllowed) - i)})
	}
	pers = append(pers, eperm, allow)
	call("personality", pers...)
	prog = append(prog, allow)
	return bpf.Assemble(prog)
}

// seccompProgramBytes is the filter as struct sock_filter[] in the machine's byte order (what
// bwrap --seccomp reads).
func seccompProgramBytes(arch string) ([]byte, error) {
	raw, err := seccompFilter(arch)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	for _, ins := range raw {
		binary.Write(&b, binary.NativeEndian, struct {
			Op     uint16
			Jt, Jf uint8
			K      uint32
		}{ins.Op, ins.Jt, ins.Jf, ins.K})
	}
	return b.Bytes(), nil
}

// seccompFile returns an unlinked file holding this machine's filter, for bwrap --seccomp;
// nil on an architecture without a syscall table (the jail then runs without the filter).
func seccompFile() (*os.File, error) {
	if _, ok := seccompArches[runtime.GOARCH]; !ok {
		return nil, nil
	}
	prog, err := seccompProgramBytes(runtime.GOARCH)
	if err != nil {
		return nil, err
	}
	fs, err := memFiles(string(prog))
	if err != nil {
		return nil, fmt.Errorf("seccomp: %w", err)
	}
	return fs[0], nil
}

// seccompSyscalls lists, for the golden test, every call the filter acts on.
func seccompSyscalls() []string {
	var s []string
	s = append(s, seccompDenied...)
	s = append(s, seccompNoSys...)
	s = append(s, "clone", "ioctl", "personality")
	for _, m := range seccompModeArg {
		s = append(s, m.name)
	}
	for _, m := range seccompMknod {
		s = append(s, m.name)
	}
	slices.Sort(s)
	return s
}

// installSeccomp installs this machine's filter on the calling process, all its threads
// included (TSYNC), with no_new_privs: the container backend's helper calls it first, so that
// it and everything it starts run under the same filter as a bwrap jail's (the engine's own
// default profile allows ptrace and setuid chmod).
func installSeccomp() error {
	raw, err := seccompFilter(runtime.GOARCH)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, ins := range raw {
		filter[i] = unix.SockFilter{Code: ins.Op, Jt: ins.Jt, Jf: ins.Jf, K: ins.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: PR_SET_NO_NEW_PRIVS: %w", err)
	}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	if errno != 0 {
		return fmt.Errorf("seccomp: install filter: %w", errno)
	}
	if r != 0 { // TSYNC: thread r could not be synchronised
		return fmt.Errorf("seccomp: install filter: thread %d could not take it", r)
	}
	runtime.KeepAlive(filter)
	return nil
}
