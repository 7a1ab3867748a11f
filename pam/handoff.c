/* The agent side of pam_latchkey: find and check the user's agent socket, speak the three hand-off
 * opcodes (docs/PROTOCOL.md framing), and start latchkeyd as the user when none runs. */
#include "latchkey.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
	WIRE_VERSION = 1,
	IO_TIMEOUT_S = 5,
	READY_TIMEOUT_MS = 5000,
	REAP_TIMEOUT_MS = 2000,
	/* Responses to the hand-off opcodes carry at most a status and a short message. */
	MAX_RESPONSE = 7 + 65535 + 64,
	MAX_BODY = 4 + LK_KEY_LEN + 4 + LK_KEY_LEN
};

/* Connects to <sockdir>/agent.sock after checking, without following symlinks, that the directory
 * is the user's own private directory and the socket is the user's; then checks that the peer
 * really is the user (SO_PEERCRED), so a swapped socket cannot point root at another daemon.
 * Returns the fd, -2 when no agent listens, or -1 with `why` set. */
int lk_agent_connect(const char *sockdir, uid_t uid, const char **why)
{
	struct sockaddr_un addr;
	struct stat st;
	struct ucred cred;
	struct timeval tv = { IO_TIMEOUT_S, 0 };
	socklen_t credlen = sizeof cred;
	int fd, n;

	memset(&addr, 0, sizeof addr);
	addr.sun_family = AF_UNIX;
	n = snprintf(addr.sun_path, sizeof addr.sun_path, "%s/agent.sock", sockdir);
	if (n < 0 || (size_t)n >= sizeof addr.sun_path)
		return *why = "socket path too long", -1;
	if (lstat(sockdir, &st) != 0)
		return errno == ENOENT ? -2 : (*why = "cannot examine the socket directory", -1);
	if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077))
		return *why = "socket directory is not a private directory owned by the user", -1;
	if (lstat(addr.sun_path, &st) != 0)
		return errno == ENOENT ? -2 : (*why = "cannot examine the agent socket", -1);
	if (!S_ISSOCK(st.st_mode) || st.st_uid != uid)
		return *why = "agent.sock is not a socket owned by the user", -1;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return *why = "socket() failed", -1;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
		close(fd);
		return *why = "cannot set socket timeouts", -1;
	}
	while ((n = connect(fd, (struct sockaddr *)&addr, sizeof addr)) != 0 && errno == EINTR)
		;
	if (n != 0) {
		n = errno;
		close(fd);
		/* A stale socket file left by an agent that died. */
		return n == ECONNREFUSED || n == ENOENT ? -2 : (*why = "connect() failed", -1);
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) != 0 || cred.uid != uid) {
		close(fd);
		return *why = "the agent socket is served by another user", -1;
	}
	return fd;
}

static int send_all(int fd, const uint8_t *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

static int recv_all(int fd, uint8_t *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = recv(fd, buf, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) /* error, timeout or EOF inside a frame */
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One request, one response: `u32 len || 1 || opcode || body`, then reads the response frame whole
 * (so the connection stays usable) and returns its i32 status. The request is wiped after sending:
 * the key hand-off carries M and DF. */
int lk_agent_call(int fd, int opcode, const uint8_t *body, size_t len, int32_t *status)
{
	uint8_t frame[4 + 2 + MAX_BODY], head[6], skip[256];
	uint32_t plen = (uint32_t)(len + 2), rlen;
	int rc;

	if (len > MAX_BODY)
		return -1;
	frame[0] = (uint8_t)(plen >> 24);
	frame[1] = (uint8_t)(plen >> 16);
	frame[2] = (uint8_t)(plen >> 8);
	frame[3] = (uint8_t)plen;
	frame[4] = WIRE_VERSION;
	frame[5] = (uint8_t)opcode;
	if (len > 0)
		memcpy(frame + 6, body, len);
	rc = send_all(fd, frame, 6 + len);
	lk_wipe(frame, sizeof frame);
	if (rc != 0 || recv_all(fd, head, 4) != 0)
		return -1;
	rlen = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
	/* Cap before reading: at least version and status, at most a status with a message. */
	if (rlen < 6 || rlen > MAX_RESPONSE || recv_all(fd, head, 6) != 0 || head[0] != WIRE_VERSION)
		return -1;
	*status = (int32_t)((uint32_t)head[1] << 24 | (uint32_t)head[2] << 16 | (uint32_t)head[3] << 8 | head[4]);
	for (rlen -= 6; rlen > 0; rlen -= (uint32_t)(rlen < sizeof skip ? rlen : sizeof skip))
		if (recv_all(fd, skip, rlen < sizeof skip ? rlen : sizeof skip) != 0)
			return -1;
	return 0;
}

/* Waits up to `ms` for `pid`, then kills it; never leaves a zombie. Returns the wait status. */
static int reap(pid_t pid, int ms)
{
	int status = 0;
	pid_t r;

	for (;;) {
		r = waitpid(pid, &status, ms > 0 ? WNOHANG : 0);
		if (r == pid || (r < 0 && errno != EINTR))
			return r == pid ? status : -1;
		if (r == 0 && ms > 0) {
			poll(NULL, 0, 10);
			if ((ms -= 10) <= 0)
				kill(pid, SIGKILL);
		}
	}
}

static char *concat(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);

	if (s != NULL) {
		memcpy(s, a, la);
		memcpy(s + la, b, lb + 1);
	}
	return s;
}

/* The child's half: runs as the user with a clean environment, then execs the agent. Only
 * async-signal-safe calls: the parent may have threads. */
static void agent_child(const struct lk_user *u, int ready_fd, char *const argv[], char *const envp[],
			const char *sockdir, const char *logpath)
{
	static const int reset[] = { SIGPIPE, SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGALRM, SIGUSR1, SIGUSR2 };
	struct sigaction sa;
	sigset_t none;
	size_t i;
	int fd, nul, log;

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	for (i = 0; i < sizeof reset / sizeof reset[0]; i++)
		sigaction(reset[i], &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Keep the pipe away from 0-3 while those are rearranged; F_DUPFD clears FD_CLOEXEC. */
	fd = fcntl(ready_fd, F_DUPFD, 10);
	if (fd < 0 || setsid() < 0 || lk_drop_privileges(u) != 0)
		_exit(126);
	if (chdir(u->home) != 0 && chdir("/") != 0)
		_exit(126);
	nul = open("/dev/null", O_RDWR | O_NOCTTY);
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0)
		_exit(126);
	(void)mkdir(sockdir, 0700); /* for the log; the agent checks the directory itself */
	log = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY, 0600);
	if (dup2(log >= 0 ? log : nul, 2) < 0 || dup2(fd, 3) < 0)
		_exit(126);
	if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0)
		for (fd = 4; fd < 1024; fd++)
			close(fd);
	execve(argv[0], argv, envp);
	_exit(127);
}

/* Starts `agent --daemon --keychain DIR` as the user and waits (at most 5 s) until it listens:
 * the agent writes one byte to LATCHKEY_READY_FD, or the pipe reaches EOF when it exits first
 * (for instance because another agent holds the lock, which is fine). */
int lk_agent_start(const struct lk_user *u, const char *agent, const char *keychain, const char *sockdir,
		   const char *runtime_env, const char **why)
{
	char *env[7] = { NULL }, logpath[4200], byte;
	char *argv[5] = { (char *)(uintptr_t)agent, (char *)"--daemon", (char *)"--keychain",
			  (char *)(uintptr_t)keychain, NULL };
	struct sigaction dfl, old;
	struct pollfd pfd;
	struct timespec start, now;
	int p[2], n = 0, ok = 0, status, rc = -1, waited = 0;
	pid_t pid;

	*why = "out of memory";
	if (snprintf(logpath, sizeof logpath, "%s/agent.log", sockdir) >= (int)sizeof logpath)
		return *why = "socket directory path too long", -1;
	/* Built before fork: the child may only make async-signal-safe calls. */
	env[0] = concat("HOME=", u->home);
	env[1] = concat("USER=", u->name);
	env[2] = concat("LOGNAME=", u->name);
	env[3] = concat("PATH=", "/usr/local/bin:/usr/bin:/bin");
	env[4] = concat("LATCHKEY_READY_FD=", "3");
	env[5] = runtime_env != NULL ? concat("XDG_RUNTIME_DIR=", runtime_env) : NULL;
	for (n = 0; n < 6; n++)
		if (env[n] == NULL && (n < 5 || runtime_env != NULL))
			goto out;
	if (pipe2(p, O_CLOEXEC) != 0) {
		*why = "pipe() failed";
		goto out;
	}
	/* The application may ignore SIGCHLD or reap children itself; we must reap ours. */
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigaction(SIGCHLD, &dfl, &old);
	pid = fork();
	if (pid == 0) {
		close(p[0]);
		agent_child(u, p[1], argv, env, sockdir, logpath);
	}
	close(p[1]);
	if (pid < 0) {
		*why = "fork() failed";
	} else {
		pfd.fd = p[0];
		pfd.events = POLLIN;
		clock_gettime(CLOCK_MONOTONIC, &start);
		while ((n = poll(&pfd, 1, READY_TIMEOUT_MS - waited)) < 0 && errno == EINTR) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			waited = (int)((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000);
			if (waited >= READY_TIMEOUT_MS) {
				n = 0;
				break;
			}
		}
		if (n > 0) {
			while ((n = (int)read(p[0], &byte, 1)) < 0 && errno == EINTR)
				;
			ok = 1; /* a byte: listening; EOF: exited, perhaps because another agent serves */
		}
		status = reap(pid, ok ? REAP_TIMEOUT_MS : 1);
		if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 126)
			*why = "cannot switch to the user for the agent";
		else if (status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 127)
			*why = "cannot execute the agent";
		else if (!ok)
			*why = "the agent did not become ready within 5 s";
		else
			rc = 0;
	}
	sigaction(SIGCHLD, &old, NULL);
	close(p[0]);
out:
	for (n = 0; n < 7; n++)
		free(env[n]);
	return rc;
}
