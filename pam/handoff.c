/* The agent side of pam_latchkey: find and check the user's agent socket, speak hello and the three
 * hand-off opcodes (docs/PROTOCOL.md framing), and start latchkeyd as the user when none runs. */
#include "latchkey.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

enum {
	WIRE_VERSION = 1,
	IO_TIMEOUT_S = 5,
	READY_TIMEOUT_MS = LK_AGENT_START_TIMEOUT_MS,
	REAP_TIMEOUT_MS = 2000,
	/* Responses to the hand-off opcodes carry at most a status and a short message. */
	MAX_RESPONSE = 7 + 65535 + 64,
	MAX_BODY = 4 + LK_KEY_LEN + 4 + LK_KEY_LEN
};

/* Connects to <sockdir>/agent.sock after checking, without following symlinks, that the directory
 * is the user's own private directory and the socket is the user's; then checks that the peer
 * really is the user (SO_PEERCRED), so a swapped socket cannot point root at another daemon.
 * The directory is opened once and checked through that descriptor, and the socket is reached
 * through /proc/self/fd/N/agent.sock of the same descriptor, so nothing can swap the directory
 * between the check and the connect (without /proc: the path, and then SO_PEERCRED alone).
 * Returns the fd, -2 when no agent listens, or -1 with `why` set. */
int lk_agent_connect(const char *sockdir, uid_t uid, const char **why)
{
	struct sockaddr_un addr;
	struct stat st;
	struct ucred cred;
	struct timeval tv = { IO_TIMEOUT_S, 0 };
	socklen_t credlen = sizeof cred;
	int dfd, fd, n;

	dfd = open(sockdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (dfd < 0)
		return errno == ENOENT ? -2
		       : errno == ELOOP || errno == ENOTDIR
		               ? (*why = "socket directory is not a private directory owned by the user", -1)
		               : (*why = "cannot open the socket directory", -1);
	memset(&addr, 0, sizeof addr);
	addr.sun_family = AF_UNIX;
	if (access("/proc/self/fd", X_OK) == 0)
		n = snprintf(addr.sun_path, sizeof addr.sun_path, "/proc/self/fd/%d/agent.sock", dfd);
	else
		n = snprintf(addr.sun_path, sizeof addr.sun_path, "%s/agent.sock", sockdir);
	if (n < 0 || (size_t)n >= sizeof addr.sun_path)
		n = -1, *why = "socket path too long";
	else if (fstat(dfd, &st) != 0)
		n = -1, *why = "cannot examine the socket directory";
	else if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077))
		n = -1, *why = "socket directory is not a private directory owned by the user";
	else if (fstatat(dfd, "agent.sock", &st, AT_SYMLINK_NOFOLLOW) != 0)
		n = errno == ENOENT ? -2 : (*why = "cannot examine the agent socket", -1);
	else if (!S_ISSOCK(st.st_mode) || st.st_uid != uid)
		n = -1, *why = "agent.sock is not a socket owned by the user";
	else
		n = 0;
	if (n != 0) {
		close(dfd);
		return n;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		close(dfd);
		return *why = "socket() failed", -1;
	}
	/* Bounds connect() (a full backlog) and any blocking call; lk_agent_call adds its own deadline. */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0) {
		close(fd);
		close(dfd);
		return *why = "cannot set socket timeouts", -1;
	}
	while ((n = connect(fd, (struct sockaddr *)&addr, sizeof addr)) != 0 && errno == EINTR)
		;
	if (n != 0)
		n = errno;
	close(dfd);
	if (n != 0) {
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

/* Whether a process holds <sockdir>/agent.lock (the socket lock a listening agent holds for its life)
 * now: a shared flock tried without waiting and released at once. 0 when the file is missing; 1 when it
 * is held or the probe cannot tell (not a regular file of the user's, an error). It is examined without
 * following links before root opens it, and must still be that file once open. An agent started for a
 * socket whose lock another holds says so (readiness byte 2) and exits; the holder may be an agent on
 * its way out that never listens, and this tells the caller to start one again.
 * AgentEndpoint.socketLockIsHeld is the Swift client's. */
int lk_agent_lock_held(const char *sockdir, uid_t uid)
{
	struct stat named, opened;
	int dfd, fd, held = 1, n;

	dfd = open(sockdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (dfd < 0)
		return errno == ENOENT ? 0 : 1;
	if (fstatat(dfd, "agent.lock", &named, AT_SYMLINK_NOFOLLOW) != 0) {
		held = errno == ENOENT ? 0 : 1;
	} else if (S_ISREG(named.st_mode) && named.st_uid == uid &&
	           (fd = openat(dfd, "agent.lock", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) >= 0) {
		if (fstat(fd, &opened) == 0 && opened.st_dev == named.st_dev && opened.st_ino == named.st_ino) {
			while ((n = flock(fd, LOCK_SH | LOCK_NB)) != 0 && errno == EINTR)
				;
			held = n != 0;
		}
		close(fd); /* releases the shared lock, if it was taken */
	}
	close(dfd);
	return held;
}

/* Waits until `fd` is ready for `events` or `deadline` passes: 0 when ready, -1 otherwise. */
static int wait_ready(int fd, short events, int64_t deadline)
{
	struct pollfd pfd;
	int64_t left;
	int r;

	for (;;) {
		left = deadline - lk_now_ms();
		if (left <= 0)
			return -1;
		pfd.fd = fd, pfd.events = events, pfd.revents = 0;
		r = poll(&pfd, 1, (int)left);
		if (r > 0)
			return 0;
		if (r == 0 || errno != EINTR)
			return -1;
	}
}

/* Non-blocking sends and receives, each waiting only until the request's deadline: an agent that
 * trickles its answer a byte at a time cannot stretch a call beyond LK_CALL_TIMEOUT_MS. */
static int send_all(int fd, const uint8_t *buf, size_t len, int64_t deadline)
{
	ssize_t n;

	while (len > 0) {
		n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_ready(fd, POLLOUT, deadline) == 0)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Who must have written what recv_all reads: with it, the socket has SO_PASSCRED, so every chunk
 * the kernel hands over carries its writer's pid and uid (SCM_CREDENTIALS, which a process cannot
 * forge for another), and a chunk never mixes two writers. pid 0: whoever writes the first chunk. */
struct sender {
	uid_t uid;
	pid_t pid;
};

/* One recv, and when `who` is given, the check of the chunk's writer. An SCM_RIGHTS a hostile peer
 * adds does not fit the buffer, so the kernel installs none of its descriptors here (MSG_CTRUNC). */
static ssize_t recv_chunk(int fd, uint8_t *buf, size_t len, struct sender *who)
{
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(struct ucred))];
	} ctl;
	struct iovec iov = { buf, len };
	struct msghdr msg;
	struct cmsghdr *cm;
	struct ucred uc;
	ssize_t n;

	if (who == NULL)
		return recv(fd, buf, len, MSG_DONTWAIT);
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov, msg.msg_iovlen = 1;
	msg.msg_control = ctl.buf, msg.msg_controllen = sizeof ctl.buf;
	if ((n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) <= 0)
		return n;
	cm = CMSG_FIRSTHDR(&msg);
	if ((msg.msg_flags & MSG_CTRUNC) || cm == NULL || cm->cmsg_level != SOL_SOCKET ||
	    cm->cmsg_type != SCM_CREDENTIALS || cm->cmsg_len != CMSG_LEN(sizeof uc))
		return errno = EPERM, -1;
	memcpy(&uc, CMSG_DATA(cm), sizeof uc);
	if (uc.uid != who->uid || uc.pid <= 0 || (who->pid != 0 && uc.pid != who->pid))
		return errno = EPERM, -1;
	who->pid = uc.pid;
	return n;
}

static int recv_all(int fd, uint8_t *buf, size_t len, int64_t deadline, struct sender *who)
{
	ssize_t n;

	while (len > 0) {
		n = recv_chunk(fd, buf, len, who);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_ready(fd, POLLIN, deadline) == 0)
			continue;
		if (n <= 0) /* error, deadline, EOF inside a frame, or a chunk from another writer */
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One request, one response: `u32 len || 1 || opcode || body`, then reads the response frame whole
 * (so the connection stays usable) and returns its i32 status, all within LK_CALL_TIMEOUT_MS. The
 * request is wiped after sending: the key hand-off carries M and DF. With `who`, every byte of the
 * response must come from that writer (struct sender). */
static int call(int fd, int opcode, const uint8_t *body, size_t len, int32_t *status, struct sender *who)
{
	uint8_t frame[4 + 2 + MAX_BODY], head[6], skip[256];
	uint32_t plen = (uint32_t)(len + 2), rlen;
	int64_t deadline = lk_now_ms() + LK_CALL_TIMEOUT_MS;
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
	rc = send_all(fd, frame, 6 + len, deadline);
	lk_wipe(frame, sizeof frame);
	if (rc != 0 || recv_all(fd, head, 4, deadline, who) != 0)
		return -1;
	rlen = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
	/* Cap before reading: at least version and status, at most a status with a message. */
	if (rlen < 6 || rlen > MAX_RESPONSE || recv_all(fd, head, 6, deadline, who) != 0 || head[0] != WIRE_VERSION)
		return -1;
	*status = (int32_t)((uint32_t)head[1] << 24 | (uint32_t)head[2] << 16 | (uint32_t)head[3] << 8 | head[4]);
	for (rlen -= 6; rlen > 0; rlen -= (uint32_t)(rlen < sizeof skip ? rlen : sizeof skip))
		if (recv_all(fd, skip, rlen < sizeof skip ? rlen : sizeof skip, deadline, who) != 0)
			return -1;
	return 0;
}

int lk_agent_call(int fd, int opcode, const uint8_t *body, size_t len, int32_t *status)
{
	return call(fd, opcode, body, len, status, NULL);
}

/* hello, answered with status 0 entirely by one process of `uid`: *pid when it is not 0, else
 * whichever (then *pid says which). SO_PASSCRED is set before the request, so the answer carries
 * credentials from its first byte. 0, or -1. */
int lk_agent_hello(int fd, uid_t uid, pid_t *pid)
{
	struct sender who = { uid, *pid };
	int32_t status = -1;
	int on = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0 ||
	    call(fd, LK_OP_HELLO, NULL, 0, &status, &who) != 0 || status != 0)
		return -1;
	*pid = who.pid;
	return 0;
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

/* Whether a file or directory could only have been written by root, or by the user we already run
 * as (a screen locker starting nothing as anybody else). A world-writable directory is fine when
 * sticky (/tmp): nobody else can rename or replace root's entries in it. */
static int trusted(const struct stat *st, int dir)
{
	uid_t me = geteuid();

	if (st->st_uid != 0 && st->st_uid != me)
		return 0;
	if (!(st->st_mode & (S_IWGRP | S_IWOTH)))
		return 1;
	return dir && (st->st_mode & S_ISVTX);
}

/* The agent runs as the user but is chosen by root's configuration: exec it only if it is a regular
 * file owned by root (or by the user we already run as) that group and others cannot write, in
 * directories nobody else can change. Symlinks are resolved first and the resolved path is what
 * gets checked and executed. Before fork: realpath allocates. 0, or -1 with `why`. */
int lk_agent_trusted(const char *path, char *resolved, size_t cap, const char **why)
{
	char *real = realpath(path, NULL), *slash;
	struct stat st;
	int ok = 1;

	if (real == NULL)
		return *why = errno == ENOENT ? "the agent executable does not exist (cannot execute it)"
		                              : "cannot resolve the agent executable's path",
		       -1;
	if (strlen(real) >= cap) {
		free(real);
		return *why = "the agent executable's path is too long", -1;
	}
	memcpy(resolved, real, strlen(real) + 1);
	if (stat(real, &st) != 0 || !S_ISREG(st.st_mode))
		*why = "the agent executable is not a regular file", ok = 0;
	else if (!trusted(&st, 0))
		*why = "the agent executable is not owned by root or is writable by group or others", ok = 0;
	/* Every directory above it, up to "/": "/a/b/x" checks "/a/b", "/a", "/". */
	while (ok && (slash = strrchr(real, '/')) != NULL) {
		slash[slash == real ? 1 : 0] = '\0';
		if (stat(real, &st) != 0 || !S_ISDIR(st.st_mode) || !trusted(&st, 1))
			*why = "a directory above the agent executable is not owned by root or is writable by others",
			ok = 0;
		if (slash == real)
			break;
	}
	free(real);
	return ok ? 0 : -1;
}

enum { EXIT_SOCKDIR = 125, EXIT_DROP = 126, EXIT_EXEC = 127 };

/* The child's half: a clean slate, the user's identity, then the socket directory (created and
 * checked as the user, through one descriptor), the log inside it, and exec. Only async-signal-safe
 * calls: the parent may have threads. */
static void agent_child(const struct lk_user *u, int ready_fd, char *const argv[], char *const envp[],
                        const char *sockdir)
{
	struct stat st;
	int fd, nul, dir, log, status = 0;
	pid_t parent, pid;

	lk_child_reset(ready_fd);
	/* Keep the pipe away from 0-3 while those are rearranged; F_DUPFD clears FD_CLOEXEC. */
	fd = fcntl(ready_fd, F_DUPFD, 10);
	if (fd < 0 || setsid() < 0 || lk_drop_privileges(u) != 0)
		_exit(EXIT_DROP);
	if (chdir(u->home) != 0 && chdir("/") != 0)
		_exit(EXIT_DROP);
	nul = open("/dev/null", O_RDWR | O_NOCTTY);
	if (nul < 0 || dup2(nul, 0) < 0 || dup2(nul, 1) < 0)
		_exit(EXIT_DROP);
	/* The user's private directory, or nothing: anybody can create /tmp/latchkey-UID first. Our own
	 * directory with loose permissions is tightened, as the agent does. */
	(void)mkdir(sockdir, 0700);
	dir = open(sockdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (dir < 0 || fstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != u->uid ||
	    ((st.st_mode & 077) && fchmod(dir, 0700) != 0))
		_exit(EXIT_SOCKDIR);
	log = openat(dir, "agent.log", O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC,
	             0600);
	if (log >= 0 && (fstat(log, &st) != 0 || !S_ISREG(st.st_mode)))
		close(log), log = -1;
	if (dup2(log >= 0 ? log : nul, 2) < 0 || dup2(fd, 3) < 0)
		_exit(EXIT_DROP);
	if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0)
		for (fd = 4; fd < 1024; fd++)
			close(fd);
	/* execve gives a process back the exit signal SIGCHLD that lk_fork_quiet took away: the
	 * application would be signalled when the agent's first process exits, and could reap it. So
	 * that process is our child instead, killed with us (a deadline), and we pass on how it ended. */
	parent = getpid();
	if ((pid = lk_fork_quiet()) == 0) {
		if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0 || getppid() != parent)
			_exit(EXIT_EXEC);
		execve(argv[0], argv, envp);
		_exit(EXIT_EXEC);
	}
	close(3); /* the readiness pipe is the agent's: its end of file is the agent's exit */
	while (pid > 0 && waitpid(pid, &status, __WALL) < 0 && errno == EINTR)
		;
	_exit(pid < 0 ? EXIT_EXEC : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/* Starts `agent --daemon --keychain DIR` as the user and waits (at most 5 s) until it listens:
 * the agent writes one byte to LATCHKEY_READY_FD, or the pipe reaches EOF when it exits first
 * (for instance because another agent holds the lock, which is fine). Byte 2 (AgentReadiness in
 * AgentEndpoint.swift): another agent holds the socket's lock and listens, or will once it has
 * opened the keychain; the one started exits. 0, LK_AGENT_ANOTHER for byte 2, or -1 with `why`. */
int lk_agent_start(const struct lk_user *u, const char *agent, const char *keychain, const char *sockdir,
                   const char *runtime_env, const char **why)
{
	char *env[7] = { NULL }, exe[4096];
	char *argv[5] = { exe, (char *)"--daemon", (char *)"--keychain", (char *)(uintptr_t)keychain, NULL };
	uint8_t byte;
	size_t got = 0;
	int p[2], n = 0, ok, status = 0, rc = -1, reaped;
	pid_t pid;

	if (lk_agent_trusted(agent, exe, sizeof exe, why) != 0)
		return -1;
	*why = "out of memory";
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
	pid = lk_fork_quiet();
	if (pid == 0) {
		close(p[0]);
		agent_child(u, p[1], argv, env, sockdir);
	}
	close(p[1]);
	if (pid < 0) {
		*why = "fork() failed";
	} else {
		/* A byte: listening. End of file: exited, perhaps because another agent serves. */
		ok = lk_read_until(p[0], &byte, 1, &got, lk_now_ms() + READY_TIMEOUT_MS) == 0;
		/* --daemon forks at once, so the process we started exits right after it is ready. */
		reaped = lk_reap(pid, ok ? lk_now_ms() + REAP_TIMEOUT_MS : 0, &status);
		if (reaped == 0 && WIFEXITED(status) && WEXITSTATUS(status) == EXIT_DROP)
			*why = "cannot switch to the user for the agent";
		else if (reaped == 0 && WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SOCKDIR)
			*why = "the socket directory cannot be created or is not a private directory owned by the user";
		else if (reaped == 0 && WIFEXITED(status) && WEXITSTATUS(status) == EXIT_EXEC)
			*why = "cannot execute the agent";
		else if (!ok)
			*why = "the agent did not become ready within 5 s";
		else
			rc = got == 1 && byte == 2 ? LK_AGENT_ANOTHER : 0;
	}
	close(p[0]);
out:
	for (n = 0; n < 7; n++)
		free(env[n]);
	return rc;
}
