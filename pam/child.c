/* Children of the login process. pam_latchkey runs inside someone else's program (login, sshd, a
 * display manager, sudo), which may have threads, its own SIGCHLD handler or SIGCHLD ignored, and
 * descriptors and signal dispositions of its own. A child here
 *
 *   - is created with clone(2) and exit signal 0 (lk_fork_quiet): its exit sends no SIGCHLD, so the
 *     application's handler never runs for it, SIG_IGN or SA_NOCLDWAIT cannot reap it behind our
 *     back, and waitpid(-1, ...) without __WALL does not see it. Only lk_reap collects it, and the
 *     module never changes the application's SIGCHLD disposition;
 *   - starts from a clean slate before it becomes the user (lk_child_reset, lk_drop_privileges);
 *   - is never waited for beyond a deadline (lk_read_until, lk_reap): once it runs as the user, the
 *     user can stop it, and it can sit on a hung network file system. At the deadline it is killed.
 *
 * Everything a child calls is async-signal-safe, as after fork() in a threaded process. It also
 * avoids glibc's set*id() wrappers, which signal the parent's other threads (gone in the child). */
#include "latchkey.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

/* Where the kernel has both, the 32-bit-id system calls (i386, arm). */
#ifdef SYS_setgroups32
#define SYS_SETGROUPS SYS_setgroups32
#define SYS_SETRESGID SYS_setresgid32
#define SYS_SETRESUID SYS_setresuid32
#else
#define SYS_SETGROUPS SYS_setgroups
#define SYS_SETRESGID SYS_setresgid
#define SYS_SETRESUID SYS_setresuid
#endif

int64_t lk_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int ms_until(int64_t deadline)
{
	int64_t left = deadline - lk_now_ms();

	return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

/* fork() with exit signal 0 (see the top of the file). With no flags and a null stack, clone is
 * fork: the child runs on a copy of our stack and memory. glibc's fork handlers do not run, which
 * is why the child keeps to system calls and then exits or execs. */
pid_t lk_fork_quiet(void)
{
	return (pid_t)syscall(SYS_clone, 0UL, 0UL, 0UL, 0UL, 0UL);
}

/* Closes lo..hi (inclusive). */
static void close_fds(unsigned int lo, unsigned int hi)
{
	struct rlimit rl;
	unsigned int fd;

	if (lo > hi || syscall(SYS_close_range, lo, hi, 0U) == 0)
		return;
	/* Kernels before 5.9: every descriptor the process could have. */
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536)
		rl.rlim_cur = 65536;
	if (hi >= rl.rlim_cur)
		hi = (unsigned int)rl.rlim_cur - 1;
	for (fd = lo; fd <= hi; fd++)
		close((int)fd);
}

/* In a new child, while still root: every signal back to SIG_DFL and none blocked (nothing of the
 * application's handlers or mask survives), every descriptor above stderr closed except `keep_fd`
 * (the pipe to the parent), and no core file, ever (the hard limit too, so the user cannot raise it
 * again): the child's memory is a copy of the login process's. */
void lk_child_reset(int keep_fd)
{
	struct sigaction sa;
	struct rlimit none = { 0, 0 };
	sigset_t empty;
	int sig;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	for (sig = 1; sig < NSIG; sig++)
		(void)sigaction(sig, &sa, NULL); /* SIGKILL, SIGSTOP and glibc's own (32, 33) refuse */
	sigemptyset(&empty);
	(void)sigprocmask(SIG_SETMASK, &empty, NULL);
	if (keep_fd > 3)
		close_fds(3, (unsigned int)keep_fd - 1);
	close_fds(keep_fd >= 3 ? (unsigned int)keep_fd + 1 : 3, ~0U);
	(void)setrlimit(RLIMIT_CORE, &none);
}

/* Becomes the user for good: groups, gid, uid (real, effective and saved), then proves it cannot
 * come back, and makes itself non-dumpable (no ptrace by the user, whatever fs.suid_dumpable says:
 * the child's memory is a copy of the login process's). Async-signal-safe, and safe in a child of
 * lk_fork_quiet: raw system calls, no glibc set*id(). A process that already runs as the user stays. */
int lk_drop_privileges(const struct lk_user *u)
{
	if (geteuid() != 0)
		return getuid() == u->uid && geteuid() == u->uid ? 0 : -1;
	if (syscall(SYS_SETGROUPS, (size_t)u->ngroups, u->groups) != 0 ||
	    syscall(SYS_SETRESGID, u->gid, u->gid, u->gid) != 0 || syscall(SYS_SETRESUID, u->uid, u->uid, u->uid) != 0)
		return -1;
	if (getuid() != u->uid || geteuid() != u->uid || getgid() != u->gid || getegid() != u->gid)
		return -1;
	if (u->uid != 0 && (syscall(SYS_SETRESUID, -1, 0, -1) == 0 || syscall(SYS_SETRESUID, 0, -1, -1) == 0))
		return -1;
	return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : -1;
}

/* Reads from `fd` into `buf` until end of file, until `cap` bytes, or until `deadline`. Returns 0
 * (end of file or `cap` bytes; `*len` says how many), ETIMEDOUT, or an errno value. */
int lk_read_until(int fd, uint8_t *buf, size_t cap, size_t *len, int64_t deadline)
{
	struct pollfd pfd;
	ssize_t n;
	int r;

	*len = 0;
	while (*len < cap) {
		pfd.fd = fd, pfd.events = POLLIN, pfd.revents = 0;
		r = poll(&pfd, 1, ms_until(deadline));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno;
		if (r == 0)
			return ETIMEDOUT;
		n = read(fd, buf + *len, cap - *len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			break;
		*len += (size_t)n;
	}
	return 0;
}

/* Collects a child of lk_fork_quiet: waits for it until `deadline` (0: not at all), then kills it
 * (SIGKILL also ends a stopped process) and waits up to LK_KILL_GRACE_MS more. Returns 0 when it
 * exited by itself, ETIMEDOUT when it had to be killed (either way `*status` is its wait status),
 * or ECHILD when it could not be collected: a process stuck in the kernel even after SIGKILL stays
 * a zombie of the application (it sends no SIGCHLD), which is better than a hung login. */
int lk_reap(pid_t pid, int64_t deadline, int *status)
{
	int64_t until = deadline;
	int killed = 0, nap = 1;
	pid_t r;

	for (;;) {
		r = waitpid(pid, status, WNOHANG | __WALL);
		if (r == pid)
			return killed ? ETIMEDOUT : 0;
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return ECHILD;
		if (ms_until(until) == 0) {
			if (killed)
				return ECHILD;
			kill(pid, SIGKILL);
			killed = 1, nap = 1;
			until = lk_now_ms() + LK_KILL_GRACE_MS;
			continue;
		}
		/* Short naps: a child that closed its pipe is about to exit, so the first one usually
		 * finds it gone. */
		poll(NULL, 0, nap < ms_until(until) ? nap : ms_until(until));
		nap = nap < 16 ? nap * 2 : 16;
	}
}
