/* The agent client without the agent: socket and directory checks, the exact request bytes of the
 * hand-off opcodes, hostile or broken responses, and the start-up contract (clean environment,
 * arguments, working directory, descriptors, readiness pipe, timeouts) with stand-in agents. */
#include "latchkey.h"

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int checks, failures;

#define CHECK(cond, ...) do { checks++; if (!(cond)) { failures++; printf("FAIL %s:%d: ", __FILE__, __LINE__); \
	printf(__VA_ARGS__); printf("\n"); } } while (0)

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
	CHECK(chmod(sockdir, 0700) == 0 && lk_agent_connect(sockdir, getuid(), &why) == -2, "no socket is not 'no agent'");
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
	CHECK(symlink(other, sock) == 0 && lk_agent_connect(sockdir, getuid(), &why) == -1, "a symlinked socket is followed");
	unlink(sock);
	snprintf(other, sizeof other, "%s/linked", dir);
	CHECK(symlink(sockdir, other) == 0 && lk_agent_connect(other, getuid(), &why) == -1,
	      "a symlinked directory is followed");
	CHECK(close(open(sock, O_CREAT | O_WRONLY, 0600)) == 0 && lk_agent_connect(sockdir, getuid(), &why) == -1,
	      "a regular file is taken for the socket");
	unlink(sock);
	if (lfd >= 0)
		close(lfd);
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
	CHECK(fd >= 0 && lk_agent_call(fd, LK_OP_KEY_HANDOFF, body, 40, &status) == 0 && status == 0, "keyHandoff without DF");
	CHECK(agent_exit(pid) == 0, "keyHandoff without DF: request bytes");
	close(fd);
	memcpy(want, "\0\0\0\x12\x01\x31", 6);
	memcpy(want + 6, "0123456789abcdef", 16);
	pid = fake_agent(lfd, want, 22, reply, 10);
	fd = lk_agent_connect(sockdir, getuid(), &why);
	CHECK(fd >= 0 && lk_agent_call(fd, LK_OP_SESSION_OPEN, (const uint8_t *)"0123456789abcdef", 16, &status) == 0 &&
	      status == 0, "sessionOpen");
	CHECK(agent_exit(pid) == 0, "sessionOpen request bytes");
	close(fd);

	/* Broken answers are errors, never a status: empty frame, huge frame, wrong version, EOF. */
	{
		static const struct { const char *bytes; size_t len; const char *what; } bad[] = {
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
			CHECK(fd >= 0 && lk_agent_call(fd, LK_OP_SESSION_CLOSE, (const uint8_t *)"0123456789abcdef", 16, &status) == -1,
			      "accepted a response with %s", bad[k].what);
			agent_exit(pid);
			close(fd);
		}
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

static double seconds_since(const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* lk_agent_start with stand-in agents (shell scripts) run as `u`. */
static void test_start(const struct lk_user *u, const char *work)
{
	char script[512], text[2048], sockdir[512], out[1024];
	const char *why = "";
	struct timespec t0;
	FILE *f;
	int rc, keep;

	snprintf(sockdir, sizeof sockdir, "%s/run/latchkey", work);
	snprintf(script, sizeof script, "%s/fake-agent", work);
	/* Records what it was given, then signals readiness on fd 3 as latchkeyd does. */
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\nenv | sort > %s/env\necho \"$@\" > %s/args\npwd > %s/cwd\n"
		   "for f in /proc/$$/fd/*; do readlink $f; done | grep -c leak-marker > %s/fds\n"
		   "readlink /proc/$$/fd/0 > %s/stdin\nreadlink /proc/$$/fd/3 | cut -c1-5 >> %s/stdin\n"
		   "echo to-the-log >&2\nprintf x >&3\n", work, work, work, work, work, work);
	fclose(f);
	chmod(script, 0755);
	snprintf(out, sizeof out, "%s/leak-marker", work);
	keep = open(out, O_WRONLY | O_CREAT, 0600); /* a descriptor the agent must not inherit */
	keep = fcntl(keep, F_DUPFD, 20);          /* above fd 3, which the child replaces anyway */
	snprintf(out, sizeof out, "%s/run", work);
	mkdir(out, 0777);
	chmod(out, 0777);
	rc = lk_agent_start(u, script, "/keychain dir", sockdir, "/run/user/4242", &why);
	CHECK(rc == 0, "start: %s", why);
	snprintf(out, sizeof out, "%s/env", work);
	snprintf(text, sizeof text, "HOME=%s\nLATCHKEY_READY_FD=3\nLOGNAME=%s\nPATH=/usr/local/bin:/usr/bin:/bin\n"
		 "PWD=%s\nUSER=%s\nXDG_RUNTIME_DIR=/run/user/4242\n", u->home, u->name, u->home, u->name);
	CHECK(strcmp(slurp(out), text) == 0, "environment:\n%s\nwant:\n%s", slurp(out), text);
	snprintf(out, sizeof out, "%s/args", work);
	CHECK(strcmp(slurp(out), "--daemon --keychain /keychain dir\n") == 0, "arguments: %s", slurp(out));
	snprintf(out, sizeof out, "%s/fds", work);
	CHECK(strcmp(slurp(out), "0\n") == 0, "the agent inherited %s descriptors of the login process", slurp(out));
	snprintf(out, sizeof out, "%s/stdin", work);
	CHECK(strcmp(slurp(out), "/dev/null\npipe:\n") == 0, "stdin and fd 3: %s", slurp(out));
	snprintf(out, sizeof out, "%s/agent.log", sockdir);
	CHECK(strcmp(slurp(out), "to-the-log\n") == 0, "stderr is not appended to agent.log: '%s'", slurp(out));
	close(keep);

	/* An agent that exits at once (another one won the lock): end of file, not an error. */
	CHECK(lk_agent_start(u, "/bin/true", "/k", sockdir, NULL, &why) == 0, "an agent that exits: %s", why);
	CHECK(lk_agent_start(u, "/nonexistent/latchkeyd", "/k", sockdir, NULL, &why) == -1 &&
	      strstr(why, "execute") != NULL, "a missing agent: %s", why);
	/* One that neither signals nor exits is given 5 s, then killed. */
	f = fopen(script, "w");
	fprintf(f, "#!/bin/sh\nexec sleep 60\n");
	fclose(f);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	CHECK(lk_agent_start(u, script, "/k", sockdir, NULL, &why) == -1 && strstr(why, "5 s") != NULL, "a stuck agent: %s", why);
	CHECK(seconds_since(&t0) < 7.5, "waited %.1f s for a stuck agent", seconds_since(&t0));
}

int main(void)
{
	char work[160];
	struct lk_user u;
	struct passwd *pw;
	gid_t groups[1];

	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(dir) == NULL)
		return 2;
	chmod(dir, 0755);
	test_connect_checks();
	test_calls();

	/* As root the agent runs as nobody (privileges really dropped); otherwise as ourselves. */
	memset(&u, 0, sizeof u);
	snprintf(work, sizeof work, "%s/start", dir);
	mkdir(work, 0777);
	chmod(work, 0777);
	if (geteuid() == 0 && (pw = getpwnam("nobody")) != NULL) {
		u.name = "nobody", u.uid = pw->pw_uid, u.gid = pw->pw_gid, u.home = work;
		groups[0] = pw->pw_gid;
		u.groups = groups, u.ngroups = 1;
	} else {
		u.name = "me", u.uid = getuid(), u.gid = getgid(), u.home = work;
	}
	test_start(&u, work);

	snprintf(work, sizeof work, "rm -rf '%s'", dir);
	CHECK(system(work) == 0, "cleanup");
	printf("test_handoff: %d checks, %d failed\n", checks, failures);
	return failures == 0 ? 0 : 1;
}
