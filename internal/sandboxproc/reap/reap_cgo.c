//go:build linux && cgo

// The reaper in C: a constructor that runs before the Go runtime starts (glibc runs the
// executable's init_array, with argc, argv and envp, before the Go entry point), so a reaper
// costs an exec of the binary and no Go runtime start. It is reap.go's reapMain line by line
// (same arguments, status line on fd 3, signals, exit codes); reap.go stays the reaper of
// CGO_ENABLED=0 builds and of non-glibc ones (whose constructors get no arguments).

#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define REAP_ARG "__porthole_reap" // reap.Arg
#define REAP_OOM "1000"            // reap.OOMScoreAdj
#define STATUS_FD 3

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static void write_all(int fd, const char *s, size_t n) {
	while (n > 0) {
		ssize_t w = write(fd, s, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		s += w;
		n -= (size_t)w;
	}
}

// errstr is Go's syscall.Errno.Error(): glibc's message with a lower-case first letter
// (sandboxproc matches "resource temporarily unavailable" to tell the process limit).
static const char *errstr(int e, char *buf, size_t n) {
	snprintf(buf, n, "%s", strerror(e));
	buf[0] = (char)tolower((unsigned char)buf[0]);
	return buf;
}

static int fail(int code, const char *prefix, const char *msg) {
	char line[512];
	int n = snprintf(line, sizeof line, "err %d %s%s\n", code, prefix, msg);
	if (n > (int)sizeof line - 1)
		n = sizeof line - 1, line[n - 1] = '\n';
	write_all(STATUS_FD, line, (size_t)n);
	return code;
}

static void set_oom_score_adj(const char *v) {
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		write_all(fd, v, strlen(v));
		close(fd);
	}
}

// cloexec_from3 marks every fd >= 3 close-on-exec: only 0, 1, 2 reach the command.
static void cloexec_from3(void) {
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) == 0)
		return;
	DIR *d = opendir("/proc/self/fd"); // kernels before 5.11
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		int fd = atoi(e->d_name);
		if (fd >= 3 && fd != dirfd(d))
			fcntl(fd, F_SETFD, FD_CLOEXEC);
	}
	closedir(d);
}

// kill_children SIGKILLs every child of the reaper (its descendants reparent to it as their
// parents die, and the wait loop calls this again). The reaper has one thread, so its
// children are in /proc/self/task/PID/children; without that file, /proc is scanned for
// processes whose parent is the reaper.
static void kill_children(void) {
	char path[300], buf[4096];
	pid_t self = getpid();
	snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)self);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		long pid = 0;
		int digits = 0;
		for (;;) {
			ssize_t n = read(fd, buf, sizeof buf);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			for (ssize_t i = 0; i < n; i++) {
				if (buf[i] >= '0' && buf[i] <= '9') {
					pid = pid * 10 + (buf[i] - '0');
					digits = 1;
				} else {
					if (digits && pid > 0)
						kill((pid_t)pid, SIGKILL);
					pid = 0, digits = 0;
				}
			}
		}
		if (digits && pid > 0)
			kill((pid_t)pid, SIGKILL);
		close(fd);
		return;
	}
	DIR *d = opendir("/proc");
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
		int sfd = open(path, O_RDONLY | O_CLOEXEC);
		if (sfd < 0)
			continue;
		ssize_t n = read(sfd, buf, sizeof buf - 1);
		close(sfd);
		if (n <= 0)
			continue;
		buf[n] = 0;
		char *p = strrchr(buf, ')');
		char state;
		int ppid;
		if (p && sscanf(p + 1, " %c %d", &state, &ppid) == 2 && ppid == (int)self)
			kill((pid_t)atoi(e->d_name), SIGKILL);
	}
	closedir(d);
}

struct child_args {
	const char *path;
	char **argv, **envp;
	int ctty;
	sigset_t mask; // the signal mask the reaper was started with
	int err;       // set by the child when it fails before or at execve
};

// child runs on its own stack in the reaper's memory (CLONE_VM|CLONE_VFORK, as posix_spawn):
// what syscall.ForkExec does with SysProcAttr{Setpgid, Foreground, Ctty: 0}.
static int child(void *arg) {
	struct child_args *a = arg;
	if (setpgid(0, 0) < 0)
		goto out;
	if (a->ctty) {
		pid_t pgrp = getpid();
		// Signals are still blocked: no SIGTTOU for a background group taking the terminal.
		if (ioctl(0, TIOCSPGRP, &pgrp) < 0)
			goto out;
	}
	sigprocmask(SIG_SETMASK, &a->mask, NULL);
	execve(a->path, a->argv, a->envp);
out:
	a->err = errno;
	_exit(127);
}

static char child_stack[64 * 1024] __attribute__((aligned(16)));

static int wait_code(int st) {
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

// reap_main is reap.go's reapMain: argv is porthole-reap __porthole_reap ctty|- PATH ARGV...
static int reap_main(int argc, char **argv, char **envp) {
	char ebuf[128];
	// The reaper blocks every signal for its whole life (a status write to a closed pipe
	// fails with EPIPE, as in Go) and reads the ones it acts on from a signalfd; the command
	// gets the signal mask the reaper was started with and every disposition at its default,
	// as the Go reaper's command does.
	sigset_t all, orig, handled;
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &orig);
	if (argc < 5)
		return fail(126, "", "reaper: bad arguments");
	struct child_args a = {.path = argv[3], .argv = argv + 4, .envp = envp, .ctty = strcmp(argv[2], "ctty") == 0, .mask = orig};
	cloexec_from3(); // the status pipe too
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return fail(126, "reaper: PR_SET_CHILD_SUBREAPER: ", errstr(errno, ebuf, sizeof ebuf));
	// The command inherits the raised score; the reaper then goes back to 0.
	set_oom_score_adj(REAP_OOM);

	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			sigaction(s, &dfl, NULL); // SIGCHLD ignored would also auto-reap
	sigemptyset(&handled);
	sigaddset(&handled, SIGTERM);
	sigaddset(&handled, SIGHUP);
	sigaddset(&handled, SIGINT);
	sigaddset(&handled, SIGQUIT);
	sigaddset(&handled, SIGCHLD);
	int sfd = signalfd(-1, &handled, SFD_CLOEXEC);
	if (sfd < 0)
		return fail(126, "reaper: signalfd: ", errstr(errno, ebuf, sizeof ebuf));

	pid_t cmd = clone(child, child_stack + sizeof child_stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
	if (cmd < 0)
		return fail(126, "", errstr(errno, ebuf, sizeof ebuf));
	if (a.err != 0) {
		while (waitpid(cmd, NULL, 0) < 0 && errno == EINTR)
			;
		return fail(a.err == ENOENT ? 127 : 126, "", errstr(a.err, ebuf, sizeof ebuf));
	}
	set_oom_score_adj("0");
	char line[32];
	int n = snprintf(line, sizeof line, "pid %d\n", (int)cmd);
	write_all(STATUS_FD, line, (size_t)n);
	close(STATUS_FD);

	int killing = 0, code = -1;
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid > 0) {
			if (pid == cmd) {
				code = wait_code(st);
				killing = 1;
			}
			continue;
		}
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			break; // ECHILD: nothing left
		}
		// Children are left: kill them once the command is gone, then sleep until a child
		// changes state (SIGCHLD) or a signal comes.
		if (killing)
			kill_children();
		struct signalfd_siginfo si[8];
		ssize_t r = read(sfd, si, sizeof si);
		if (r < 0) {
			if (errno != EINTR && waitpid(-1, &st, 0) == cmd) // cannot happen; do not spin
				code = wait_code(st), killing = 1;
			continue;
		}
		for (size_t i = 0; i < (size_t)r / sizeof si[0]; i++) {
			int sig = (int)si[i].ssi_signo;
			switch (sig) {
			case SIGTERM:
				killing = 1;
				kill(-cmd, SIGKILL);
				kill_children();
				break;
			case SIGHUP:
			case SIGINT:
			case SIGQUIT:
				kill(-cmd, sig);
				if (sig == SIGHUP)
					kill(-cmd, SIGCONT);
				break;
			}
		}
	}
	if (code < 0)
		return 137;
	return code;
}

#ifdef __GLIBC__
__attribute__((constructor)) static void porthole_reap_early(int argc, char **argv, char **envp) {
	if (argc > 1 && argv != NULL && argv[1] != NULL && strcmp(argv[1], REAP_ARG) == 0)
		_exit(reap_main(argc, argv, envp));
}
#endif
