/* lk_agent_genuine (peer.c) against stand-in agents: copies of this program, started the way an
 * attacker of the same uid could start one, each serving the socket the module connects to. Only the
 * copy the module is told to trust, started cleanly and left alone, gets through.
 *
 * Needs root, as the check itself does (it reads /proc/PID/map_files); skipped otherwise.
 * Usage: test_peer /abs/tests/preload.so
 * (and, as a stand-in: test_peer --stand-in LISTEN_FD MODE) */
#include "latchkey.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

extern char **environ;

/* What a stand-in does besides serving: nothing; hand the connection to a child after the first
 * answer; enter a user namespace of its own; erase LD_PRELOAD from its environment block (the
 * preloaded library could do the same); patch a page of its own code (with the byte already there:
 * the page becomes an anonymous copy all the same). */
enum mode { PLAIN, FORK_AFTER_HELLO, USER_NAMESPACE, ERASE_PRELOAD, PATCH_CODE };

static char dir[] = "/tmp/lk-peer-test-XXXXXX";
static char agent[96], other[96], sockdir[96];

static int read_full(int fd, uint8_t *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		if ((n = read(fd, buf, len)) <= 0)
			return -1;
		buf += n, len -= (size_t)n;
	}
	return 0;
}

static void erase_preload(void)
{
	char **e;

	for (e = environ; *e != NULL; e++)
		if (strncmp(*e, "LD_PRELOAD=", 11) == 0)
			memset(*e, 'X', strlen(*e));
}

static int patch_code(void)
{
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *at = (uint8_t *)((uintptr_t)(void *)read_full & ~(uintptr_t)(page - 1));

	if (mprotect(at, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
		return -1;
	*(volatile uint8_t *)at = *(volatile uint8_t *)at;
	return mprotect(at, (size_t)page, PROT_READ | PROT_EXEC);
}

/* Answers every request on every connection with status 0, until killed. */
static int stand_in(int lfd, enum mode mode)
{
	static const uint8_t ok[10] = { 0, 0, 0, 6, 1, 0, 0, 0, 0, 0 };
	uint8_t head[4], body[256];
	uint32_t len;
	int fd, answered, child = 0;

	if ((mode == USER_NAMESPACE && unshare(CLONE_NEWUSER) != 0) || (mode == PATCH_CODE && patch_code() != 0))
		return 5;
	if (mode == ERASE_PRELOAD)
		erase_preload();
	for (;;) {
		if ((fd = accept(lfd, NULL, NULL)) < 0)
			return 3;
		for (answered = 0; read_full(fd, head, 4) == 0; answered++) {
			len = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
			if (len < 2 || len > sizeof body || read_full(fd, body, len) != 0 ||
			    write(fd, ok, sizeof ok) != (ssize_t)sizeof ok)
				break;
			if (mode == FORK_AFTER_HELLO && answered == 0 && !(child = fork() == 0))
				break; /* the child answers from now on */
		}
		close(fd);
		if (child)
			_exit(0);
	}
}

static int listen_at(const char *path)
{
	struct sockaddr_un a;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof a.sun_path)
		return -1;
	memcpy(a.sun_path, path, strlen(path));
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0)
		return -1;
	return fd;
}

/* Starts `exe --stand-in FD MODE` with `env`, listening on <sockdir>/agent.sock. */
static pid_t start(const char *exe, enum mode mode, char *const env[])
{
	char sock[128], fd_arg[16], mode_arg[16];
	char *argv[] = { (char *)exe, (char *)"--stand-in", fd_arg, mode_arg, NULL };
	int lfd;
	pid_t pid;

	snprintf(sock, sizeof sock, "%s/agent.sock", sockdir);
	if ((lfd = listen_at(sock)) < 0)
		return -1;
	snprintf(fd_arg, sizeof fd_arg, "%d", lfd);
	snprintf(mode_arg, sizeof mode_arg, "%d", (int)mode);
	if ((pid = fork()) == 0) {
		/* The loader complains about LD_AUDIT=/nonexistent.so; the checks say what went wrong. */
		int null = open("/dev/null", O_WRONLY);
		if (null < 0 || dup2(null, 2) < 0)
			_exit(4);
		execve(exe, argv, env);
		_exit(4);
	}
	close(lfd);
	return pid;
}

/* (A child that took a connection over, FORK_AFTER_HELLO, ends at its end of file.) */
static void stop(pid_t pid)
{
	int status;

	if (pid > 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
}

/* Connects as the module does and asks; 0 or -1, with `why`. */
static int ask(const char *trusted, uid_t uid, const char **why)
{
	pid_t pid = 0;
	int fd, rc;

	/* The socket listens before the stand-in runs; only the stand-in, past its set-up, answers. */
	*why = "cannot connect";
	if ((fd = lk_agent_connect(sockdir, getuid(), why)) < 0)
		return -1;
	rc = lk_agent_genuine(fd, trusted, uid, &pid, why);
	close(fd);
	return rc;
}

/* One case: a stand-in started as `exe` with `mode` and `env`; want 0 (passes) or the reason. */
static void expect(const char *what, const char *exe, enum mode mode, char *const env[], const char *trusted,
                   const char *want)
{
	const char *why = "";
	pid_t pid = start(exe, mode, env);
	int rc = pid > 0 ? ask(trusted, getuid(), &why) : -1;

	if (want == NULL)
		CHECK(rc == 0, "%s: refused: %s", what, why);
	else
		CHECK(rc == -1 && strstr(why, want) != NULL, "%s: want '%s', got %d '%s'", what, want, rc, why);
	stop(pid);
}

/* (In this process: /proc/self/exe is this program, not a cp(1) run for it.) */
static int copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	ssize_t n = 0;
	int in = open(from, O_RDONLY | O_CLOEXEC), out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);

	while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, (size_t)n) != n)
			n = -1;
	if (in >= 0)
		close(in);
	if (out >= 0 && close(out) != 0)
		n = -1;
	return in >= 0 && out >= 0 && n == 0 && chmod(to, mode) == 0 ? 0 : -1;
}

static void test_stand_ins(const char *preload_so)
{
	char preload[PATH_MAX + 16], mine[400], preload_mine[PATH_MAX + 16], *clean[] = { NULL };
	char *preloaded[] = { preload, NULL }, *preloaded_mine[] = { preload_mine, NULL };
	char *library[] = { (char *)"LD_LIBRARY_PATH=/nonexistent", NULL };
	char *audit[] = { (char *)"LD_AUDIT=/nonexistent.so", NULL };
	char *backtrace[] = { (char *)"HOME=/", (char *)"SWIFT_BACKTRACE=enable=no", NULL };
	char *openssl[] = { (char *)"OPENSSL_CONF=/nonexistent.cnf", NULL };
	char *opensc[] = { (char *)"OPENSC_CONF=/nonexistent.conf", NULL };
	char *p11_server[] = { (char *)"P11_KIT_SERVER_ADDRESS=unix:path=/nonexistent", NULL };
	struct passwd *pw = getpwnam("nobody");
	const char *why = "";
	pid_t pid;

	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", preload_so);
	expect("the trusted agent", agent, PLAIN, clean, agent, NULL);
	expect("another executable", other, PLAIN, clean, agent, "does not run the agent executable");
	expect("LD_PRELOAD", agent, PLAIN, preloaded, agent, "LD_PRELOAD");
	expect("LD_LIBRARY_PATH", agent, PLAIN, library, agent, "LD_LIBRARY_PATH");
	expect("LD_AUDIT", agent, PLAIN, audit, agent, "LD_AUDIT");
	expect("SWIFT_BACKTRACE, after another variable", agent, PLAIN, backtrace, agent, "SWIFT_BACKTRACE");
	expect("OPENSSL_CONF", agent, PLAIN, openssl, agent, "OPENSSL_CONF");
	expect("OPENSC_CONF", agent, PLAIN, opensc, agent, "OPENSC_CONF");
	expect("P11_KIT_SERVER_ADDRESS", agent, PLAIN, p11_server, agent, "P11_KIT_SERVER_ADDRESS");
	expect("a connection handed to a child", agent, FORK_AFTER_HELLO, clean, agent, "second hello");
	expect("a user namespace of its own", agent, USER_NAMESPACE, clean, agent, "user namespace");
	expect("patched code", agent, PATCH_CODE, clean, agent, "code in the agent was changed");

	/* A library of the user's, preloaded and then erased from the environment block. */
	snprintf(mine, sizeof mine, "%s/mine.so", dir);
	snprintf(preload_mine, sizeof preload_mine, "LD_PRELOAD=%s", mine);
	CHECK(copy_file(preload_so, mine, 0755) == 0 && pw != NULL && chown(mine, pw->pw_uid, pw->pw_gid) == 0,
	      "a library of nobody's");
	expect("a library of the user's, its variable erased", agent, ERASE_PRELOAD, preloaded_mine, agent,
	       "not root's");

	/* Traced: root attaches to the stand-in (a tracer of the user's would have done so at its exec). */
	pid = start(agent, PLAIN, clean);
	CHECK(pid > 0 && ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0, "attach");
	CHECK(ask(agent, getuid(), &why) == -1 && strstr(why, "traced") != NULL, "a traced agent: %s", why);
	stop(pid);

	/* The agent of another uid; an agent path that is not trusted in the first place. */
	pid = start(agent, PLAIN, clean);
	CHECK(ask(agent, getuid() + 1, &why) == -1 && strstr(why, "hello") != NULL, "another uid: %s", why);
	CHECK(chmod(agent, 0775) == 0 && ask(agent, getuid(), &why) == -1 && strstr(why, "writable") != NULL,
	      "a group-writable agent executable: %s", why);
	CHECK(chmod(agent, 0755) == 0 && ask(agent, getuid(), &why) == 0, "the agent again: %s", why);
	stop(pid);
}

int main(int argc, char **argv)
{
	char bin[64], cmd[128];

	if (argc == 4 && strcmp(argv[1], "--stand-in") == 0)
		return stand_in(atoi(argv[2]), (enum mode)atoi(argv[3]));
	if (argc != 2) {
		fprintf(stderr, "usage: test_peer preload.so\n");
		return 2;
	}
	if (geteuid() != 0) {
		printf("test_peer: skipped (needs root, as the check does)\n");
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(dir) == NULL || chmod(dir, 0755) != 0)
		return 2;
	/* Two copies of this program where only root can change them: the trusted one and another file. */
	snprintf(bin, sizeof bin, "%s/bin", dir);
	snprintf(agent, sizeof agent, "%s/agent", bin);
	snprintf(other, sizeof other, "%s/other", bin);
	snprintf(sockdir, sizeof sockdir, "%s/latchkey", dir);
	CHECK(mkdir(bin, 0755) == 0 && mkdir(sockdir, 0700) == 0, "directories");
	CHECK(copy_file("/proc/self/exe", agent, 0755) == 0 && copy_file("/proc/self/exe", other, 0755) == 0,
	      "copies of the test");
	test_stand_ins(argv[1]);

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	CHECK(system(cmd) == 0, "cleanup");
	printf("test_peer: %d checks, %d failed\n", checks, failures);
	return failures == 0 ? 0 : 1;
}
