/* The agent client without the agent: socket and directory checks, the exact request bytes of the
 * hand-off opcodes, hostile, broken or slow responses, and the start-up contract (a trusted
 * executable, clean environment, arguments, working directory, descriptors, signals, readiness
 * pipe, the socket directory and its log, timeouts) with stand-in agents; and the children of the
 * login process (child.c): no SIGCHLD, a clean slate, deadlines. */
#include "latchkey.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static char dir[] = "/tmp/lk-handoff-test-XXXXXX";

static int listen_at(const char *path)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 4) != 0)
		return -1;
	return fd;
}

static void test_connect_checks(void)
{
	char sockdir[128], sock[160], other[160];
	const char *why = "";
	int lfd, fd;

	snprintf(sockdir, sizeof sockdir, "%s/latchkey", dir);
	snprintf(sock, sizeof sock, "%s/agent.sock", sockdir);
	CHECK(lk_agent_connect(sockdir, getuid(), &why) == -2, "missing directory is not 'no agent'");
	CHECK(mkdir(sockdir, 0755) == 0 && lk_agent_connect(sockdir, getuid(), &why) == -1,
	      "a directory others can enter is accepted");
	CHECK(chmod(sockdir, 0700) == 0 && lk_agent_connect(sockdir, getuid(), &why) == -2,
	      "no socket is not 'no agent'");
	CHECK(lk_agent_connect(sockdir, getuid() + 1, &why) == -1, "a directory of another uid is accepted");

	lfd = listen_at(sock);
	CHECK(lfd >= 0, "listen");
	fd = lk_agent_connect(sockdir, getuid(), &why);
	CHECK(fd >= 0, "connect to a good socket: %s", why);
	if (fd >= 0)
		close(fd);
	if (geteuid() == 0) {
		/* The socket's owner and the peer are both checked; root can fake the owner. */
		CHECK(chown(sock, 1, 1) == 0 && lk_agent_connect(sockdir, getuid(), &why) == -1,
		      "a socket owned by another uid is accepted");
		CHECK(chown(sock, 0, 0) == 0 && chown(sockdir, 1, 1) == 0 && chown(sock, 1, 1) == 0 &&
		              lk_agent_connect(sockdir, 1, &why) == -1 && strstr(why, "another user") != NULL,
		      "a socket served by root is accepted for uid 1 (%s)", why);
		CHECK(chown(sockdir, 0, 0) == 0 && chown(sock, 0, 0) == 0, "chown back");
	}
	close(lfd);
	CHECK(lk_agent_connect(sockdir, getuid(), &why) == -2, "a stale socket is not 'no agent'");

	/* Symlinks, for the directory and for the socket, are refused, never followed. */
	lfd = listen_at(sock);
	snprintf(other, sizeof other, "%s/real.sock", dir);
	CHECK(lfd >= 0 && rename(sock, other) == 0, "move the socket");
	CHECK(symlink(other, sock) == 0 && lk_agent_connect(sockdir, getuid(), &why) == -1,
	      "a symlinked socket is followed");
	unlink(sock);
	snprintf(other, sizeof other, "%s/linked", dir);
	CHECK(symlink(sockdir, other) == 0 && lk_agent_connect(other, getuid(), &why) == -1,
	      "a symlinked directory is followed");
	CHECK(close(open(sock, O_CREAT | O_WRONLY, 0600)) == 0 && lk_agent_connect(sockdir, getuid(), &why) == -1,
	      "a regular file is taken for the socket");
	unlink(sock);
	if (lfd >= 0)
		close(lfd);

	/* The socket is reached through the checked directory's descriptor (/proc/self/fd/N/agent.sock),
	 * so even a directory whose path does not fit in sun_path works. */
	{
		char deep[400], name[120];
		int here = open(".", O_RDONLY | O_DIRECTORY);

		memset(name, 'd', 100);
		name[100] = '\0';
		snprintf(deep, sizeof deep, "%s/%s", dir, name);
		CHECK(mkdir(deep, 0700) == 0 && chdir(deep) == 0, "deep directory");
		lfd = listen_at("agent.sock");
		CHECK(here >= 0 && fchdir(here) == 0, "back");
		fd = lk_agent_connect(deep, getuid(), &why);
		CHECK(lfd >= 0 && fd >= 0, "connect through a %zu-byte directory path: %s", strlen(deep),
		      fd < 0 ? why : "");
		if (fd >= 0)
			close(fd);
		if (lfd >= 0)
			close(lfd);
		if (here >= 0)
			close(here);
	}
}

/* A stand-in agent for one connection: checks the request bytes, then sends `reply` verbatim. */
static pid_t fake_agent(int lfd, const uint8_t *want, size_t wantlen, const uint8_t *reply, size_t replylen)
{
	pid_t pid = fork();
	uint8_t got[256];
	size_t n = 0;
	ssize_t r;
	int fd;

	if (pid != 0)
		return pid;
	fd = accept(lfd, NULL, NULL);
	while (n < wantlen && (r = read(fd, got + n, sizeof got - n)) > 0)
		n += (size_t)r;
	if (n != wantlen || memcmp(got, want, wantlen) != 0)
		_exit(3);
	if (replylen > 0 && write(fd, reply, replylen) != (ssize_t)replylen)
		_exit(4);
	_exit(0);
}

/* A stand-in agent that reads the request, then trickles `reply` one byte every `gap_ms`. */
static pid_t slow_agent(int lfd, size_t wantlen, const uint8_t *reply, size_t replylen, int gap_ms)
{
	pid_t pid = fork();
	uint8_t got[256];
	size_t n = 0, i;
	ssize_t r;
	int fd;

	if (pid != 0)
		return pid;
	fd = accept(lfd, NULL, NULL);
	while (n < wantlen && (r = read(fd, got + n, sizeof got - n)) > 0)
		n += (size_t)r;
	for (i = 0; i < replylen; i++) {
		poll(NULL, 0, gap_ms);
		if (write(fd, reply + i, 1) != 1)
			_exit(0); /* the client gave up */
	}
	_exit(0);
}

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static int agent_exit(pid_t pid)
{
	int status = 0;
	return waitpid(pid, &status, 0) == pid && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_calls(void)
{
	char sockdir[128], sock[160];
	uint8_t body[72], want[80], reply[64];
	const char *why = "";
	int32_t status = 99;
	int lfd, fd, i;
	pid_t pid;

	snprintf(sockdir, sizeof sockdir, "%s/latchkey", dir);
	snprintf(sock, sizeof sock, "%s/agent.sock", sockdir);
	lfd = listen_at(sock);

	/* keyHandoff: u32 len 74 | 01 30 | u32 32 | M | u32 32 | DF. Reply: status -25293 + message. */
	memcpy(body, "\0\0\0\x20", 4);
	for (i = 0; i < 32; i++)
		body[4 + i] = (uint8_t)i, body[40 + i] = (uint8_t)(0x80 + i);
	memcpy(body + 36, "\0\0\0\x20", 4);
	memcpy(want, "\0\0\0\x4a\x01\x30", 6);
	memcpy(want + 6, body, 72);
	memcpy(reply, "\0\0\0\x0a\x01\xff\xff\x9d\x33\x02\x00\x02ok", 14);
	pid = fake_agent(lfd, want, 78, reply, 14);
	fd = lk_agent_connect(sockdir, getuid(), &why);
	CHECK(fd >= 0 && lk_agent_call(fd, LK_OP_KEY_HANDOFF, body, 72, &status) == 0 && status == -25293,
	      "keyHandoff: status %d", status);
	CHECK(agent_exit(pid) == 0, "keyHandoff request bytes differ from the protocol");
	close(fd);

	/* Without DF: the second secret is empty. sessionOpen: the bare 16-byte token. */
	memcpy(want, "\0\0\0\x2a\x01\x30", 6);
	memcpy(want + 6, body, 36);
	memcpy(want + 42, "\0\0\0\0", 4);
	memcpy(reply, "\0\0\0\x06\x01\0\0\0\0\0", 10);
	pid = fake_agent(lfd, want, 46, reply, 10);
	memcpy(body + 36, "\0\0\0\0", 4);
	fd = lk_agent_connect(sockdir, getuid(), &why);
	CHECK(fd >= 0 && lk_agent_call(fd, LK_OP_KEY_HANDOFF, body, 40, &status) == 0 && status == 0,
	      "keyHandoff without DF");
	CHECK(agent_exit(pid) == 0, "keyHandoff without DF: request bytes");
	close(fd);
	memcpy(want, "\0\0\0\x12\x01\x31", 6);
	memcpy(want + 6, "0123456789abcdef", 16);
	pid = fake_agent(lfd, want, 22, reply, 10);
	fd = lk_agent_connect(sockdir, getuid(), &why);
	CHECK(fd >= 0 && lk_agent_call(fd, LK_OP_SESSION_OPEN, (const uint8_t *)"0123456789abcdef", 16, &status) == 0 &&
	              status == 0,
	      "sessionOpen");
	CHECK(agent_exit(pid) == 0, "sessionOpen request bytes");
	close(fd);

	/* Broken answers are errors, never a status: empty frame, huge frame, wrong version, EOF. */
	{
		static const struct {
			const char *bytes;
			size_t len;
			const char *what;
		} bad[] = {
			{ "\0\0\0\0", 4, "length 0" },
			{ "\x7f\xff\xff\xff\x01\0\0\0\0\0", 10, "2 GiB frame" },
			{ "\0\0\0\x06\x02\0\0\0\0\0", 10, "version 2" },
			{ "\0\0\0\x06\x01\0\0", 7, "EOF inside the frame" },
			{ "", 0, "EOF before the frame" },
		};
		size_t k;

		memcpy(want, "\0\0\0\x12\x01\x32", 6);
		for (k = 0; k < sizeof bad / sizeof bad[0]; k++) {
			pid = fake_agent(lfd, want, 22, (const uint8_t *)bad[k].bytes, bad[k].len);
			fd = lk_agent_connect(sockdir, getuid(), &why);
			CHECK(fd >= 0 && lk_agent_call(fd, LK_OP_SESSION_CLOSE, (const uint8_t *)"0123456789abcdef", 16,
			                               &status) == -1,
			      "accepted a response with %s", bad[k].what);
			agent_exit(pid);
			close(fd);
		}
	}

	/* The whole request has one deadline (LK_CALL_TIMEOUT_MS): an agent that answers a byte every
	 * 0.7 s (each read well within any per-read timeout) is cut off after 5 s, not served for 7. */
	{
		struct timespec t0;
		double took;

		memcpy(reply, "\0\0\0\x06\x01\0\0\0\0\0", 10);
		pid = slow_agent(lfd, 22, reply, 10, 700);
		fd = lk_agent_connect(sockdir, getuid(), &why);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(fd >= 0 && lk_agent_call(fd, LK_OP_SESSION_OPEN, (const uint8_t *)"0123456789abcdef", 16,
		                               &status) == -1,
		      "a trickling agent was waited for beyond the deadline");
		took = seconds_since(&t0);
		CHECK(took > 4.5 && took < 6.0, "a trickling agent took %.1f s, want about 5", took);
		close(fd);
		agent_exit(pid);
	}
	close(lfd);
	unlink(sock);
}

static char *slurp(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void write_script(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
	chmod(path, 0755);
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* No child of ours left, not even a zombie (children of lk_fork_quiet included: __WALL). */
static int no_children(void)
{
	int status;
	return waitpid(-1, &status, WNOHANG | __WALL) == -1 && errno == ECHILD;
}

/* lk_agent_start with stand-in agents (shell scripts in `bin`, a directory only we can write) run
 * as `u`, who owns `work`. */
static void test_start(const struct lk_user *u, const char *work, const char *bin)
{
	char script[512], text[2048], sockdir[512], out[1024], other[1024];
	const char *why = "";
	struct timespec t0;
	struct stat st;
	sigset_t block;
	int rc, keep;

	snprintf(sockdir, sizeof sockdir, "%s/run/latchkey", work);
	snprintf(script, sizeof script, "%s/fake-agent", bin);
	/* Records what it was given, then signals readiness on fd 3 as latchkeyd does. */
	snprintf(text, sizeof text,
	         "#!/bin/sh\nenv | sort > %s/env\necho \"$@\" > %s/args\npwd > %s/cwd\n"
	         "for f in /proc/$$/fd/*; do readlink $f; done | grep -c leak-marker > %s/fds\n"
	         "readlink /proc/$$/fd/0 > %s/stdin\nreadlink /proc/$$/fd/3 | cut -c1-5 >> %s/stdin\n"
	         "ulimit -Hc > %s/core\necho to-the-log >&2\nprintf x >&3\n",
	         work, work, work, work, work, work, work);
	write_script(script, text);
	snprintf(out, sizeof out, "%s/leak-marker", work);
	keep = open(out, O_WRONLY | O_CREAT, 0600); /* a descriptor the agent must not inherit */
	keep = fcntl(keep, F_DUPFD, 20); /* above fd 3, which the child replaces anyway */
	snprintf(out, sizeof out, "%s/run", work);
	mkdir(out, 0700);
	CHECK(chown(out, u->uid, u->gid) == 0, "chown %s", out);
	rc = lk_agent_start(u, script, "/keychain dir", sockdir, "/run/user/4242", &why);
	CHECK(rc == 0, "start: %s", why);
	snprintf(out, sizeof out, "%s/env", work);
	snprintf(text, sizeof text,
	         "HOME=%s\nLATCHKEY_READY_FD=3\nLOGNAME=%s\nPATH=/usr/local/bin:/usr/bin:/bin\n"
	         "PWD=%s\nUSER=%s\nXDG_RUNTIME_DIR=/run/user/4242\n",
	         u->home, u->name, u->home, u->name);
	CHECK(strcmp(slurp(out), text) == 0, "environment:\n%s\nwant:\n%s", slurp(out), text);
	snprintf(out, sizeof out, "%s/args", work);
	CHECK(strcmp(slurp(out), "--daemon --keychain /keychain dir\n") == 0, "arguments: %s", slurp(out));
	snprintf(out, sizeof out, "%s/fds", work);
	CHECK(strcmp(slurp(out), "0\n") == 0, "the agent inherited %s descriptors of the login process", slurp(out));
	snprintf(out, sizeof out, "%s/stdin", work);
	CHECK(strcmp(slurp(out), "/dev/null\npipe:\n") == 0, "stdin and fd 3: %s", slurp(out));
	/* The login process's own signal state must not reach the agent. (The stand-in is grep itself:
	 * a shell blocks every signal for a moment whenever it forks.) */
	snprintf(other, sizeof other, "%s/signal-agent", bin);
	snprintf(text, sizeof text, "#!/bin/sh\nexec grep -E '^Sig(Blk|Ign):' /proc/self/status > %s/signals\n", work);
	write_script(other, text);
	signal(SIGTSTP, SIG_IGN);
	signal(SIGUSR2, SIG_IGN);
	sigemptyset(&block);
	sigaddset(&block, SIGUSR1);
	sigprocmask(SIG_BLOCK, &block, NULL);
	rc = lk_agent_start(u, other, "/k", sockdir, NULL, &why);
	sigprocmask(SIG_UNBLOCK, &block, NULL);
	signal(SIGTSTP, SIG_DFL);
	signal(SIGUSR2, SIG_DFL);
	CHECK(rc == 0, "start: %s", why);
	snprintf(out, sizeof out, "%s/signals", work);
	{
		/* glibc keeps signals 32 to SIGRTMIN - 1 for itself (sigaction refuses them), and make(1)
		 * runs us with them ignored; every other signal must be back to default. */
		unsigned long long blk = ~0ULL, ign = ~0ULL, libc = 0;
		int sig;

		for (sig = 32; sig < SIGRTMIN; sig++)
			libc |= 1ULL << (sig - 1);
		CHECK(sscanf(slurp(out), "SigBlk: %llx SigIgn: %llx", &blk, &ign) == 2 && blk == 0 &&
		              (ign & ~libc) == 0,
		      "the agent inherited blocked or ignored signals:\n%s", slurp(out));
	}
	snprintf(out, sizeof out, "%s/core", work);
	CHECK(strcmp(slurp(out), "0\n") == 0, "the agent may dump core (hard limit %s)", slurp(out));
	snprintf(out, sizeof out, "%s/agent.log", sockdir);
	CHECK(strcmp(slurp(out), "to-the-log\n") == 0, "stderr is not appended to agent.log: '%s'", slurp(out));
	CHECK(stat(out, &st) == 0 && st.st_uid == u->uid && (st.st_mode & 07777) == 0600, "agent.log owner or mode");
	close(keep);
	CHECK(no_children(), "a child of the start is left behind");

	/* A log that is a symlink is not followed (stderr goes nowhere); our own directory with loose
	 * permissions is tightened, as the agent does. */
	unlink(out);
	snprintf(other, sizeof other, "%s/log-target", work);
	CHECK(symlink(other, out) == 0 && chmod(sockdir, 0755) == 0, "setup");
	CHECK(lk_agent_start(u, script, "/k", sockdir, NULL, &why) == 0, "start with a symlinked log: %s", why);
	CHECK(!exists(other), "the agent log followed a symlink");
	CHECK(stat(sockdir, &st) == 0 && (st.st_mode & 07777) == 0700, "socket directory not tightened: %o",
	      (unsigned)(st.st_mode & 07777));
	unlink(out);

	/* A socket directory somebody else made first (/tmp/latchkey-UID): no log in it, no agent. */
	if (geteuid() == 0) {
		uid_t stranger = u->uid == 1 ? 2 : 1;

		snprintf(other, sizeof other, "%s/run/planted", work);
		snprintf(out, sizeof out, "%s/env", work);
		unlink(out);
		CHECK(mkdir(other, 0777) == 0 && chmod(other, 0777) == 0 && chown(other, stranger, stranger) == 0,
		      "setup");
		CHECK(lk_agent_start(u, script, "/k", other, NULL, &why) == -1 &&
		              strstr(why, "socket directory") != NULL,
		      "an agent started in a directory of uid %u: %s", (unsigned)stranger, why);
		snprintf(text, sizeof text, "%s/agent.log", other);
		CHECK(!exists(text), "agent.log created in a directory of another user");
		CHECK(!exists(out), "the agent ran with a socket directory of another user");
	}

	/* Only an executable nobody but root (or we) could have written. */
	snprintf(other, sizeof other, "%s/fake-agent", work); /* work is the user's */
	snprintf(text, sizeof text, "cp %s %s", script, other);
	CHECK(system(text) == 0, "copy");
	if (geteuid() == 0) {
		CHECK(chown(other, u->uid, u->gid) == 0 && lk_agent_start(u, other, "/k", sockdir, NULL, &why) == -1 &&
		              strstr(why, "not owned by root") != NULL,
		      "an agent owned by the user is run as root: %s", why);
		CHECK(chown(other, 0, 0) == 0 && lk_agent_start(u, other, "/k", sockdir, NULL, &why) == -1 &&
		              strstr(why, "directory above") != NULL,
		      "an agent in the user's directory is run: %s", why);
	}
	CHECK(chmod(script, 0775) == 0 && lk_agent_start(u, script, "/k", sockdir, NULL, &why) == -1 &&
	              strstr(why, "writable") != NULL,
	      "a group-writable agent is run: %s", why);
	CHECK(chmod(script, 0755) == 0 && chmod(bin, 0777) == 0 &&
	              lk_agent_start(u, script, "/k", sockdir, NULL, &why) == -1 &&
	              strstr(why, "directory above") != NULL,
	      "an agent in a world-writable directory is run: %s", why);
	CHECK(chmod(bin, 01777) == 0 && lk_agent_start(u, script, "/k", sockdir, NULL, &why) == 0,
	      "an agent in a sticky directory (like /tmp) is refused: %s", why);
	chmod(bin, 0755);
	snprintf(other, sizeof other, "%s/agent-link", bin);
	CHECK(symlink(script, other) == 0 && lk_agent_start(u, other, "/k", sockdir, NULL, &why) == 0,
	      "a symlink to a good agent: %s", why);
	CHECK(lk_agent_start(u, "/dev/null", "/k", sockdir, NULL, &why) == -1 && strstr(why, "regular") != NULL,
	      "a device is taken for the agent: %s", why);

	/* An agent that exits at once (another one won the lock): end of file, not an error. */
	CHECK(lk_agent_start(u, "/bin/true", "/k", sockdir, NULL, &why) == 0, "an agent that exits: %s", why);
	/* One that reports another agent holding the socket's lock (readiness byte 2), then exits. */
	write_script(script, "#!/bin/sh\nprintf '\\002' >&3\n");
	CHECK((rc = lk_agent_start(u, script, "/k", sockdir, NULL, &why)) == LK_AGENT_ANOTHER,
	      "readiness byte 2: %d (%s)", rc, why);
	write_script(script, "#!/bin/sh\nprintf '\\001' >&3\n");
	CHECK((rc = lk_agent_start(u, script, "/k", sockdir, NULL, &why)) == 0, "readiness byte 1: %d (%s)", rc, why);
	CHECK(lk_agent_start(u, "/nonexistent/latchkeyd", "/k", sockdir, NULL, &why) == -1 &&
	              strstr(why, "execute") != NULL,
	      "a missing agent: %s", why);
	/* One that neither signals nor exits is given 5 s, then killed; so is one that stops itself. */
	write_script(script, "#!/bin/sh\nexec sleep 60\n");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(lk_agent_start(u, script, "/k", sockdir, NULL, &why) == -1 && strstr(why, "5 s") != NULL,
	      "a stuck agent: %s", why);
	CHECK(seconds_since(&t0) < 6.5, "waited %.1f s for a stuck agent", seconds_since(&t0));
	write_script(script, "#!/bin/sh\nkill -STOP $$\nprintf x >&3\n");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(lk_agent_start(u, script, "/k", sockdir, NULL, &why) == -1 && strstr(why, "5 s") != NULL,
	      "a stopped agent: %s", why);
	CHECK(seconds_since(&t0) < 6.5, "waited %.1f s for a stopped agent", seconds_since(&t0));
	CHECK(no_children(), "a stuck or stopped agent is left behind");
}

/* ---- child.c ---- */

static volatile sig_atomic_t sigchld_seen;

static void on_sigchld(int sig)
{
	(void)sig;
	sigchld_seen++;
}

static int64_t since_ms(int64_t t0)
{
	return lk_now_ms() - t0;
}

static void test_children(void)
{
	struct sigaction sa, now;
	int p[2], status = 0, rc, extra;
	uint8_t buf[16];
	size_t len = 0;
	int64_t t0;
	pid_t pid;

	/* No SIGCHLD: the application's handler never runs for our child, and SIG_IGN does not reap it. */
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigchld;
	sigaction(SIGCHLD, &sa, NULL);
	sigchld_seen = 0;
	if ((pid = lk_fork_quiet()) == 0)
		_exit(7);
	poll(NULL, 0, 100);
	CHECK(lk_reap(pid, lk_now_ms() + 2000, &status) == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 7,
	      "quiet child: status %#x", status);
	CHECK(sigchld_seen == 0, "the application's SIGCHLD handler ran %d times", (int)sigchld_seen);
	CHECK(sigaction(SIGCHLD, NULL, &now) == 0 && now.sa_handler == on_sigchld, "SIGCHLD disposition changed");
	signal(SIGCHLD, SIG_IGN);
	if ((pid = lk_fork_quiet()) == 0)
		_exit(9);
	poll(NULL, 0, 100);
	CHECK(lk_reap(pid, lk_now_ms() + 2000, &status) == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 9,
	      "with SIGCHLD ignored the status is lost: %#x", status);
	/* Nor can the application's own waitpid(-1) take it. */
	if ((pid = lk_fork_quiet()) == 0) {
		pause();
		_exit(0);
	}
	CHECK(waitpid(-1, &status, WNOHANG) == -1 && errno == ECHILD, "waitpid(-1) sees the quiet child");
	t0 = lk_now_ms();
	CHECK(lk_reap(pid, 0, &status) == ETIMEDOUT && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	      "deadline 0 kills at once");
	CHECK(since_ms(t0) < 500, "killing took %lld ms", (long long)since_ms(t0));
	signal(SIGCHLD, SIG_DFL);

	/* Output, exit status, the byte cap. */
	CHECK(pipe(p) == 0, "pipe");
	if ((pid = lk_fork_quiet()) == 0) {
		close(p[0]);
		_exit(write(p[1], "hello, world", 12) == 12 ? 3 : 4);
	}
	close(p[1]);
	rc = lk_read_until(p[0], buf, 5, &len, lk_now_ms() + 2000);
	CHECK(rc == 0 && len == 5 && memcmp(buf, "hello", 5) == 0, "read with a cap: rc %d len %zu", rc, len);
	CHECK(lk_reap(pid, lk_now_ms() + 2000, &status) == 0 && WEXITSTATUS(status) == 3, "status %#x", status);
	close(p[0]);

	/* A child that stops before it writes (the user's SIGSTOP): the read gives up at the deadline
	 * and the child is killed, stopped as it is. */
	CHECK(pipe(p) == 0, "pipe");
	if ((pid = lk_fork_quiet()) == 0) {
		close(p[0]);
		raise(SIGSTOP);
		_exit(write(p[1], "late", 4) == 4 ? 0 : 1);
	}
	close(p[1]);
	t0 = lk_now_ms();
	rc = lk_read_until(p[0], buf, sizeof buf, &len, t0 + 300);
	CHECK(rc == ETIMEDOUT && len == 0, "read from a stopped child: rc %d", rc);
	CHECK(since_ms(t0) >= 290 && since_ms(t0) < 1000, "read deadline 300 ms took %lld ms", (long long)since_ms(t0));
	CHECK(lk_reap(pid, 0, &status) == ETIMEDOUT && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	      "stopped child not killed: %#x", status);
	CHECK(since_ms(t0) < 1500, "reaping a stopped child took %lld ms", (long long)since_ms(t0));
	close(p[0]);

	/* One that closes the pipe and then stops: end of file at once, killed at the reap deadline. */
	CHECK(pipe(p) == 0, "pipe");
	if ((pid = lk_fork_quiet()) == 0) {
		close(p[0]);
		close(p[1]);
		raise(SIGSTOP);
		_exit(0);
	}
	close(p[1]);
	t0 = lk_now_ms();
	CHECK(lk_read_until(p[0], buf, sizeof buf, &len, t0 + 2000) == 0 && len == 0 && since_ms(t0) < 1000, "EOF");
	CHECK(lk_reap(pid, t0 + 300, &status) == ETIMEDOUT && WTERMSIG(status) == SIGKILL, "stopped after EOF: %#x",
	      status);
	CHECK(since_ms(t0) >= 290 && since_ms(t0) < 1500, "reap deadline 300 ms took %lld ms", (long long)since_ms(t0));
	close(p[0]);

	/* lk_child_reset: handlers, ignored and blocked signals, descriptors, core limit. */
	{
		sigset_t block, mask;
		struct sigaction usr1;
		struct rlimit core;

		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_sigchld;
		sigaction(SIGUSR1, &sa, NULL);
		signal(SIGUSR2, SIG_IGN);
		sigemptyset(&block);
		sigaddset(&block, SIGTERM);
		sigprocmask(SIG_BLOCK, &block, NULL);
		extra = open("/dev/null", O_RDONLY);
		extra = fcntl(extra, F_DUPFD, 40);
		CHECK(pipe(p) == 0, "pipe");
		if ((pid = lk_fork_quiet()) == 0) {
			int bad = 0;

			lk_child_reset(p[1]);
			sigaction(SIGUSR1, NULL, &usr1);
			bad |= usr1.sa_handler != SIG_DFL;
			sigaction(SIGUSR2, NULL, &usr1);
			bad |= (usr1.sa_handler != SIG_DFL) << 1;
			sigprocmask(SIG_SETMASK, NULL, &mask);
			bad |= sigismember(&mask, SIGTERM) << 2;
			bad |= (fcntl(extra, F_GETFD) != -1) << 3;
			bad |= (fcntl(p[0], F_GETFD) != -1) << 4;
			bad |= (fcntl(p[1], F_GETFD) == -1) << 5;
			bad |= (getrlimit(RLIMIT_CORE, &core) != 0 || core.rlim_cur != 0 || core.rlim_max != 0) << 6;
			bad |= (fcntl(2, F_GETFD) == -1) << 7; /* stdin, stdout and stderr stay */
			_exit(bad);
		}
		close(p[1]);
		CHECK(lk_reap(pid, lk_now_ms() + 2000, &status) == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "lk_child_reset left state behind (bits %#x)", WEXITSTATUS(status));
		close(p[0]);
		close(extra);
		sigprocmask(SIG_UNBLOCK, &block, NULL);
		signal(SIGUSR1, SIG_DFL);
		signal(SIGUSR2, SIG_DFL);
	}
	CHECK(no_children(), "children left behind");
}

/* lk_drop_privileges in a quiet child (no glibc set*id: raw system calls): all ids, the groups,
 * no way back, and not dumpable. */
static void test_drop(const struct lk_user *u)
{
	int status = 0;
	pid_t pid;

	if (geteuid() != 0 || u->uid == 0) {
		printf("  (not root: privilege drop checks skipped)\n");
		return;
	}
	if ((pid = lk_fork_quiet()) == 0) {
		uid_t r, e, s;
		gid_t gr, ge, gs, groups[8];
		int bad = 0;

		if (lk_drop_privileges(u) != 0)
			_exit(100);
		bad |= (getresuid(&r, &e, &s) != 0 || r != u->uid || e != u->uid || s != u->uid);
		bad |= (getresgid(&gr, &ge, &gs) != 0 || gr != u->gid || ge != u->gid || gs != u->gid) << 1;
		bad |= (getgroups(8, groups) != u->ngroups || groups[0] != u->groups[0]) << 2;
		bad |= (setuid(0) == 0 || seteuid(0) == 0) << 3;
		bad |= (prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) << 4;
		_exit(bad);
	}
	CHECK(lk_reap(pid, lk_now_ms() + 2000, &status) == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "privilege drop: bits %#x", WEXITSTATUS(status));
}

int main(void)
{
	char work[160], bin[160];
	struct lk_user u;
	struct passwd *pw;
	gid_t groups[1];

	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(dir) == NULL)
		return 2;
	chmod(dir, 0755);
	test_connect_checks();
	test_calls();

	test_children();

	/* As root the agent runs as nobody (privileges really dropped); otherwise as ourselves. The
	 * user's home is theirs; the stand-in agents live in a directory only we can write. */
	memset(&u, 0, sizeof u);
	snprintf(work, sizeof work, "%s/start", dir);
	snprintf(bin, sizeof bin, "%s/bin", dir);
	mkdir(work, 0700);
	mkdir(bin, 0755);
	if (geteuid() == 0 && (pw = getpwnam("nobody")) != NULL) {
		u.name = "nobody", u.uid = pw->pw_uid, u.gid = pw->pw_gid, u.home = work;
		groups[0] = pw->pw_gid;
		u.groups = groups, u.ngroups = 1;
	} else {
		u.name = "me", u.uid = getuid(), u.gid = getgid(), u.home = work;
	}
	CHECK(chown(work, u.uid, u.gid) == 0, "chown %s", work);
	test_drop(&u);
	test_start(&u, work, bin);

	snprintf(work, sizeof work, "rm -rf '%s'", dir);
	CHECK(system(work) == 0, "cleanup");
	printf("test_handoff: %d checks, %d failed\n", checks, failures);
	return failures == 0 ? 0 : 1;
}
