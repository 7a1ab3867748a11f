/* pam_latchkey.so through real Linux-PAM (pam_start_confdir with a private service directory) and two
 * real system users, A ("nobody") and B ("daemon"), with stand-in agents running as each that record
 * the requests they get:
 *
 *   - what auth leaves is used only for the same user: sudo authenticates A and then opens the
 *     session of B (PAM_USER changes in between), which must not hand A's key to B's agent, remove
 *     B's out-of-step marker, write a false one, or create B's keychain with A's password;
 *   - the session token is used only for the user whose session was opened;
 *   - open_session registers the session (sessionOpen) before it hands over the key (keyHandoff);
 *   - a keybag beyond the PAM limits is never derived from (t = 2^32 - 1 would hang the login);
 *   - only_services= restricts the module to the services listed;
 *   - root hands the key only to the real agent: the stand-ins run a copy of this program that the
 *     module is configured to trust as its agent; an impostor (this program itself, another file) and
 *     the copy started with LD_PRELOAD get nothing;
 *   - it sends the logind session id (XDG_SESSION_ID) when there is a valid one, and falls back to
 *     sessionOpen for an agent that predates that (the stand-ins answer errSecUnimplemented);
 *   - without XDG_RUNTIME_DIR, it finds the agent in /run/user/UID/latchkey when logind made that
 *     directory (as the Swift client does);
 *   - an agent it starts that finds another one holding the socket (readiness byte 2) is waited for,
 *     and when that holder exits without listening (an agent on its way out), another is started;
 *   - no key is handed over when the agent refused the session (nothing would lock it at logout), and
 *     the module running as the user (a screen locker) sends no session requests;
 *   - the module never runs the application's SIGCHLD handler and leaves no child behind.
 *
 * Needs root (the module and the stand-ins act as the users); skipped otherwise.
 * Usage: test_pam /abs/pam_latchkey.so /abs/tests/test_authtok.so
 * (and, as the stand-in agent, test_pam --stand-in LISTEN_FD LETTERS_FD ok|refuse; as an agent the
 * module starts when none runs, --daemon --keychain DIR: see started_agent) */
#include "latchkey.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <security/pam_appl.h>

#include "check.h"

#define SERVICE "latchkey-test"

struct who {
	char name[64], run[256], keychain[256], keybag[300], marker[300];
	uid_t uid;
	gid_t gid;
	struct lk_user user;
	gid_t groups[1];
};

struct agent {
	pid_t pid;
	int execed; /* ran execve: the kernel gave it back the exit signal SIGCHLD */
	int ops; /* read end: one letter per request, K keyHandoff, O sessionOpen, C sessionClose, D
	          * sessionOpenWithDetails for logind session "c5" (d for any other body) */
};

static char top[] = "/tmp/lk-pam-driver-XXXXXX";
static char confdir[300], agent_copy[300], preload[PATH_MAX + 16];
static struct who A, B;
static volatile sig_atomic_t sigchld_seen;
static int own_sigchld; /* of those, the ones our own stand-ins sent */

static void on_sigchld(int sig)
{
	(void)sig;
	sigchld_seen++;
}

static int conv(int n, const struct pam_message **msg, struct pam_response **resp, void *data)
{
	(void)n, (void)msg, (void)resp, (void)data;
	return PAM_CONV_ERR; /* nothing here may prompt */
}

static const struct pam_conv conversation = { conv, NULL };

static int set_user(struct who *w, const char *name)
{
	struct passwd *pw = getpwnam(name);

	if (pw == NULL || pw->pw_uid == 0)
		return -1;
	memset(w, 0, sizeof *w);
	snprintf(w->name, sizeof w->name, "%s", name);
	w->uid = pw->pw_uid, w->gid = pw->pw_gid;
	snprintf(w->run, sizeof w->run, "%s/run-%s", top, name);
	snprintf(w->keychain, sizeof w->keychain, "%s/kc/%s", top, name);
	snprintf(w->keybag, sizeof w->keybag, "%s/keybag", w->keychain);
	snprintf(w->marker, sizeof w->marker, "%s/password-out-of-step", w->keychain);
	w->groups[0] = w->gid;
	w->user.name = w->name, w->user.uid = w->uid, w->user.gid = w->gid, w->user.home = "/";
	w->user.groups = w->groups, w->user.ngroups = 1;
	return 0;
}

static int private_dir(const char *path, const struct who *w)
{
	return mkdir(path, 0700) == 0 && chown(path, w->uid, w->gid) == 0 ? 0 : -1;
}

static int exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

static void touch_as(const char *path, const struct who *w)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	CHECK(fd >= 0 && write(fd, "x\n", 2) == 2 && fchown(fd, w->uid, w->gid) == 0, "create %s", path);
	if (fd >= 0)
		close(fd);
}

static void put_be32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24), b[1] = (uint8_t)(v >> 16), b[2] = (uint8_t)(v >> 8), b[3] = (uint8_t)v;
}

/* An unbound keybag for `w` opened by `pw` (t=1, 8 MiB, p=1); with t != 0 its stored t is then
 * replaced (checksum resealed), as a user could do to their own file. */
static void put_keybag(const struct who *w, const char *pw, uint32_t t, uint32_t m, uint32_t p)
{
	uint8_t salt[16] = { 7 }, master[32], file[LK_KEYBAG_SIZE];
	struct lk_keybag kb;
	unsigned int n = 0;
	int fd;

	CHECK(lk_master_key(pw, strlen(pw), salt, 1, 8192, 1, master) == 0 &&
	              lk_create(&kb, master, salt, 1, 8192, 1, NULL, (uint32_t)w->uid) == LK_OK,
	      "make a keybag");
	lk_serialize(&kb, file);
	if (t != 0) {
		put_be32(file + 28, t), put_be32(file + 32, m), put_be32(file + 36, p);
		EVP_Digest(file, 548, file + 548, &n, EVP_sha256(), NULL);
	}
	unlink(w->keybag);
	fd = open(w->keybag, O_WRONLY | O_CREAT | O_EXCL, 0600);
	CHECK(fd >= 0 && write(fd, file, sizeof file) == (ssize_t)sizeof file && fchown(fd, w->uid, w->gid) == 0,
	      "write %s", w->keybag);
	if (fd >= 0)
		close(fd);
}

/* Whether the keybag on disk opens with `pw`. */
static int keybag_opens(const struct who *w, const char *pw)
{
	uint8_t buf[LK_KEYBAG_SIZE + 1], master[32];
	struct lk_keybag kb;
	const char *reason;
	size_t len = 0;

	return lk_read_user_file(w->keybag, w->uid, buf, sizeof buf, &len) == 0 &&
	       lk_parse(buf, len, &kb, &reason) == LK_OK &&
	       lk_master_key(pw, strlen(pw), kb.salt, kb.t, kb.m, kb.p, master) == 0 &&
	       lk_check_master(&kb, master) == LK_OK;
}

/* ---- stand-in agents ---- */

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

/* The letter for a request (see struct agent); 0 for hello. */
static char request_letter(const uint8_t *body, uint32_t len)
{
	/* token || {"logind": "c5"} (docs/PROTOCOL.md) */
	static const uint8_t c5[] = "\x08\0\0\0\x01\0\0\0\x06logind\x01\0\0\0\x02"
				    "c5";

	if (body[1] != LK_OP_SESSION_OPEN_DETAILS)
		return body[1] == LK_OP_KEY_HANDOFF     ? 'K'
		       : body[1] == LK_OP_SESSION_OPEN  ? 'O'
		       : body[1] == LK_OP_SESSION_CLOSE ? 'C'
		       : body[1] == LK_OP_HELLO         ? 0
		                                        : '?';
	return len == 2 + LK_TOKEN_LEN + sizeof c5 - 1 && memcmp(body + 2 + LK_TOKEN_LEN, c5, sizeof c5 - 1) == 0 ? 'D'
	                                                                                                          : 'd';
}

/* The stand-in's work, in the process the module checks: answers every request on connections to
 * `lfd` with status 0 (but sessionOpenWithDetails with -4, as an agent that predates it; and with
 * `refuse`, both session opens with errSecAuthFailed, as an agent refusing the session), after
 * writing its letter to `letters` (so it is there before the module has its answer); hello gets no
 * letter. */
static int stand_in(int lfd, int letters, int refuse)
{
	static const char success[] = "\0\0\0\x06\x01\0\0\0\0\0",
			  unimplemented[] = "\0\0\0\x06\x01\xff\xff\xff\xfc\0", /* status -4 */
		refused[] = "\0\0\0\x06\x01\xff\xff\x9d\x33\0"; /* status -25293 */
	const char *answer;
	int fd;

	for (;;) {
		uint8_t head[4], body[256];
		uint32_t len;
		char letter;

		if ((fd = accept(lfd, NULL, NULL)) < 0)
			return 3;
		while (read_full(fd, head, 4) == 0) {
			len = (uint32_t)head[0] << 24 | (uint32_t)head[1] << 16 | (uint32_t)head[2] << 8 | head[3];
			if (len < 2 || len > sizeof body || read_full(fd, body, len) != 0)
				break;
			letter = request_letter(body, len);
			answer = refuse && (letter == 'O' || tolower(letter) == 'd') ? refused
			         : tolower(letter) == 'd'                            ? unimplemented
			                                                             : success;
			if ((letter != 0 && write(letters, &letter, 1) != 1) || write(fd, answer, 10) != 10)
				break;
		}
		close(fd);
	}
}

/* How a stand-in runs: the agent the module trusts (its copy, a clean environment), the same under
 * LD_PRELOAD, an impostor (this program, not the copy: another file), the trusted one refusing
 * sessions, or the trusted one that listens only a second after the module started an agent (its
 * socket is bound but refuses connections until then; agent.log appears when the module starts one). */
enum stand_in_kind { GENUINE, PRELOADED, IMPOSTOR, REFUSING, LATE };

/* Waits (at most 5 s, or `wait_ms` more for LATE) for the stand-in's signal that it listens. */
static void agent_wait(struct agent *a, const struct who *w, int wait_ms)
{
	struct pollfd pfd;
	char ready = 0;

	pfd.fd = a->ops, pfd.events = POLLIN;
	CHECK(a->pid > 0 && poll(&pfd, 1, 5000 + wait_ms) == 1 && read(a->ops, &ready, 1) == 1 && ready == 'R',
	      "stand-in agent for %s did not start", w->name);
	fcntl(a->ops, F_SETFL, O_NONBLOCK);
}

/* Listens on <run>/latchkey/agent.sock as `w`, then becomes the stand-in (stand_in). LATE returns at
 * once: agent_wait then waits for it. */
static void agent_start_as(struct agent *a, const struct who *w, enum stand_in_kind kind)
{
	char sockdir[300], log[320], lock[320], lfd_arg[16], letters_arg[16];
	char *argv[] = {
		agent_copy, (char *)"--stand-in", lfd_arg, letters_arg, (char *)(kind == REFUSING ? "refuse" : "ok"),
		NULL
	};
	char *clean[] = { NULL }, *preloaded[] = { preload, NULL };
	struct sockaddr_un addr;
	int p[2], lfd, i;

	a->pid = -1, a->ops = -1, a->execed = kind != IMPOSTOR;
	if (pipe(p) != 0)
		return;
	/* Quiet too, but an exec brings SIGCHLD back: agent_stop counts those as the test's own. */
	if ((a->pid = lk_fork_quiet()) == 0) {
		close(p[0]);
		snprintf(sockdir, sizeof sockdir, "%s/latchkey", w->run);
		snprintf(log, sizeof log, "%s/agent.log", sockdir);
		memset(&addr, 0, sizeof addr);
		addr.sun_family = AF_UNIX;
		if (strlen(sockdir) + 12 > sizeof addr.sun_path)
			_exit(1);
		memcpy(addr.sun_path, sockdir, strlen(sockdir));
		memcpy(addr.sun_path + strlen(sockdir), "/agent.sock", 12);
		if (lk_drop_privileges(&w->user) != 0 || mkdir(sockdir, 0700) != 0)
			_exit(1);
		/* The socket's lock, as latchkeyd holds it for its life (kept across the exec). */
		snprintf(lock, sizeof lock, "%s/agent.lock", sockdir);
		if ((lfd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW, 0600)) < 0 || flock(lfd, LOCK_EX | LOCK_NB) != 0)
			_exit(1);
		lfd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (lfd < 0 || bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0)
			_exit(2);
		for (i = 0; kind == LATE && !exists(log) && i < 1000; i++)
			usleep(10000);
		if (kind == LATE)
			usleep(1000000);
		if (listen(lfd, 8) != 0 || write(p[1], "R", 1) != 1)
			_exit(2);
		if (kind == IMPOSTOR)
			_exit(stand_in(lfd, p[1], 0));
		snprintf(lfd_arg, sizeof lfd_arg, "%d", lfd);
		snprintf(letters_arg, sizeof letters_arg, "%d", p[1]);
		execve(agent_copy, argv, kind == PRELOADED ? preloaded : clean);
		_exit(4);
	}
	close(p[1]);
	a->ops = p[0];
	if (kind != LATE)
		agent_wait(a, w, 0);
}

/* The agent the module starts (--daemon --keychain DIR). When DIR holds a file "serve", it does what
 * latchkeyd does: it takes the socket's lock without waiting (held by another: readiness byte 2 on fd 3,
 * and exit), binds and listens, forks (the process the module started exits), writes byte 1 and serves
 * as a stand-in, its letters appended to DIR/letters and its pid in DIR/pid. Otherwise it exits at once,
 * as one that found another agent holding the lock: an agent that predates readiness byte 2 just exits,
 * a current one (when DIR holds "another-agent") writes 2 first. */
static int started_agent(const char *keychain)
{
	char path[PATH_MAX + 32], sockdir[PATH_MAX];
	const char *run = getenv("XDG_RUNTIME_DIR");
	struct sockaddr_un addr;
	int lock, lfd, letters, n;
	FILE *f;

	snprintf(path, sizeof path, "%s/serve", keychain);
	if (!exists(path)) {
		snprintf(path, sizeof path, "%s/another-agent", keychain);
		return exists(path) && write(3, "\x02", 1) != 1 ? 1 : 0;
	}
	if (run == NULL)
		return 1;
	snprintf(sockdir, sizeof sockdir, "%s/latchkey", run);
	snprintf(path, sizeof path, "%s/agent.lock", sockdir);
	if ((lock = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return 1;
	if (flock(lock, LOCK_EX | LOCK_NB) != 0)
		return errno == EWOULDBLOCK && write(3, "\x02", 1) == 1 ? 0 : 1;
	memset(&addr, 0, sizeof addr);
	addr.sun_family = AF_UNIX;
	n = snprintf(addr.sun_path, sizeof addr.sun_path, "%s/agent.sock", sockdir);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (n < 0 || (size_t)n >= sizeof addr.sun_path || lfd < 0 ||
	    bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(lfd, 8) != 0)
		return 1;
	snprintf(path, sizeof path, "%s/letters", keychain);
	if ((letters = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0)
		return 1;
	switch (fork()) {
	case -1:
		return 1;
	case 0:
		break;
	default:
		return 0;
	}
	setsid();
	snprintf(path, sizeof path, "%s/pid", keychain);
	if ((f = fopen(path, "w")) == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0 ||
	    write(3, "\x01", 1) != 1)
		return 1;
	close(3);
	return stand_in(lfd, letters, 0);
}

static void agent_start(struct agent *a, const struct who *w)
{
	agent_start_as(a, w, GENUINE);
}

/* The letters received since the last call. */
static const char *agent_ops(struct agent *a)
{
	static char buf[64];
	ssize_t n = a->ops >= 0 ? read(a->ops, buf, sizeof buf - 1) : -1;

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

static void agent_stop(struct agent *a, const struct who *w)
{
	char path[400];
	int status;

	if (a->pid > 0) {
		kill(a->pid, SIGKILL);
		/* The handler has run once waitpid returns: the signal came with the child's death. */
		if (waitpid(a->pid, &status, __WALL) == a->pid && a->execed)
			own_sigchld++;
	}
	if (a->ops >= 0)
		close(a->ops);
	a->pid = -1, a->ops = -1;
	snprintf(path, sizeof path, "%s/latchkey/agent.sock", w->run);
	unlink(path);
	snprintf(path, sizeof path, "%s/latchkey/agent.log", w->run); /* of an agent the module started */
	unlink(path);
	snprintf(path, sizeof path, "%s/latchkey/agent.lock", w->run);
	unlink(path);
	snprintf(path, sizeof path, "%s/latchkey", w->run);
	rmdir(path);
}

/* ---- PAM ---- */

static pam_handle_t *begin_service(const char *service, const struct who *w)
{
	pam_handle_t *h = NULL;

	CHECK(pam_start_confdir(service, w->name, &conversation, confdir, &h) == PAM_SUCCESS, "pam_start_confdir");
	return h;
}

static pam_handle_t *begin(const struct who *w)
{
	return begin_service(SERVICE, w);
}

/* PAM_USER and the runtime directory of `w` (as pam_systemd would set XDG_RUNTIME_DIR). */
static void become(pam_handle_t *h, const struct who *w)
{
	char env[300];

	snprintf(env, sizeof env, "XDG_RUNTIME_DIR=%s", w->run);
	CHECK(pam_set_item(h, PAM_USER, w->name) == PAM_SUCCESS && pam_putenv(h, env) == PAM_SUCCESS, "set user");
}

static int authenticate(pam_handle_t *h, const char *pw)
{
	char env[128];

	snprintf(env, sizeof env, "LK_TEST_AUTHTOK=%s", pw);
	return pam_putenv(h, env) == PAM_SUCCESS ? pam_authenticate(h, 0) : PAM_SYSTEM_ERR;
}

/* ---- the cases ---- */

/* sudo: A authenticates with A's password, the session is B's. */
static void test_verified_key_stays_with_its_user(void)
{
	struct agent a, b;
	pam_handle_t *h;

	put_keybag(&A, "pw-A", 0, 0, 0);
	touch_as(B.marker, &B);
	agent_start(&b, &B);
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
	become(h, &B);
	CHECK(pam_open_session(h, 0) == PAM_SUCCESS, "open_session");
	CHECK(strcmp(agent_ops(&b), "O") == 0, "B's agent got more than its own session (A's key?)");
	CHECK(exists(B.marker), "B's out-of-step marker removed with A's password");
	CHECK(pam_close_session(h, 0) == PAM_SUCCESS && strcmp(agent_ops(&b), "C") == 0, "B's session close");
	pam_end(h, PAM_SUCCESS);
	unlink(B.marker);

	/* The same user throughout: the key is handed over, after the session is registered; and a
	 * token whose user is no longer PAM_USER reaches nobody. */
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
	agent_start(&a, &A); /* only now, so the key is not delivered at auth already */
	CHECK(pam_open_session(h, 0) == PAM_SUCCESS, "open_session");
	CHECK(strcmp(agent_ops(&a), "OK") == 0, "A's agent: want sessionOpen, then keyHandoff");
	become(h, &B);
	pam_close_session(h, 0);
	CHECK(strcmp(agent_ops(&a), "") == 0 && strcmp(agent_ops(&b), "") == 0, "a session token of A was used for B");
	pam_end(h, PAM_SUCCESS);

	/* An agent already running at auth gets the key then (a screen locker), and the session no
	 * second time. */
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "pw-A") == PAM_SUCCESS && strcmp(agent_ops(&a), "K") == 0, "hand-off at auth");
	CHECK(pam_open_session(h, 0) == PAM_SUCCESS && strcmp(agent_ops(&a), "O") == 0,
	      "session after a hand-off at auth");
	pam_end(h, PAM_SUCCESS);
	agent_stop(&a, &A);
	agent_stop(&b, &B);
}

/* A wrong password for A, the session is B's: B gets no false marker; A (same user) gets one. */
static void test_mismatch_stays_with_its_user(void)
{
	pam_handle_t *h;

	put_keybag(&A, "pw-A", 0, 0, 0);
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "not-pw-A") == PAM_SUCCESS, "auth");
	become(h, &B);
	pam_open_session(h, 0);
	CHECK(!exists(B.marker), "out-of-step marker written for B from A's password");
	pam_end(h, PAM_SUCCESS);

	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "not-pw-A") == PAM_SUCCESS, "auth");
	pam_open_session(h, 0);
	CHECK(exists(A.marker), "no out-of-step marker for A (the test cannot see the module work)");
	pam_end(h, PAM_SUCCESS);
	unlink(A.marker);
}

/* auto_create: A has no keychain, the session is B's: nothing is created for B with A's password. */
static void test_create_stays_with_its_user(void)
{
	pam_handle_t *h;

	unlink(A.keybag);
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
	become(h, &B);
	pam_open_session(h, 0);
	CHECK(!exists(B.keybag), "B's keychain created with A's password");
	CHECK(!exists(A.keybag), "A's keychain created in B's session");
	pam_end(h, PAM_SUCCESS);

	h = begin(&B);
	become(h, &B);
	CHECK(authenticate(h, "pw-B") == PAM_SUCCESS, "auth");
	CHECK(pam_open_session(h, 0) == PAM_SUCCESS, "open_session");
	CHECK(keybag_opens(&B, "pw-B"), "auto_create for B itself did not create a keychain that opens with pw-B");
	pam_end(h, PAM_SUCCESS);
	unlink(B.keybag);
}

/* Keybags beyond t 16, m 1 GiB, p 8: no derivation (auth returns at once), no hand-off, no marker. */
static void test_limits(void)
{
	static const struct {
		uint32_t t, m, p;
	} bad[] = { { 4294967295U, 8192, 1 }, { 1, 1048577, 1 }, { 1, 8192, 9 } };
	struct timespec t0, t1;
	struct agent a;
	pam_handle_t *h;
	double took;
	size_t i;

	agent_start(&a, &A);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		put_keybag(&A, "pw-A", bad[i].t, bad[i].m, bad[i].p);
		h = begin(&A);
		become(h, &A);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
		clock_gettime(CLOCK_MONOTONIC, &t1);
		took = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
		CHECK(took < 2.0, "t=%u m=%u p=%u: auth took %.1f s", bad[i].t, bad[i].m, bad[i].p, took);
		CHECK(strcmp(agent_ops(&a), "") == 0, "t=%u m=%u p=%u: a key was handed over at auth", bad[i].t,
		      bad[i].m, bad[i].p);
		pam_open_session(h, 0);
		CHECK(strcmp(agent_ops(&a), "O") == 0, "t=%u m=%u p=%u: more than the session", bad[i].t, bad[i].m,
		      bad[i].p);
		CHECK(!exists(A.marker), "t=%u m=%u p=%u: marker written", bad[i].t, bad[i].m, bad[i].p);
		pam_end(h, PAM_SUCCESS);
	}
	agent_stop(&a, &A);
	unlink(A.keybag);
}

/* only_services=: a service not in the list gets nothing, one in it the usual. */
static void test_only_services(void)
{
	static const struct {
		const char *service, *want_auth, *want_session;
	} cases[] = {
		{ SERVICE "-off", "", "" },
		{ SERVICE "-on", "K", "O" },
	};
	struct agent a;
	pam_handle_t *h;
	size_t i;

	put_keybag(&A, "pw-A", 0, 0, 0);
	agent_start(&a, &A);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		h = begin_service(cases[i].service, &A);
		become(h, &A);
		CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
		CHECK(strcmp(agent_ops(&a), cases[i].want_auth) == 0, "%s: auth", cases[i].service);
		pam_open_session(h, 0);
		CHECK(strcmp(agent_ops(&a), cases[i].want_session) == 0, "%s: session", cases[i].service);
		pam_end(h, PAM_SUCCESS);
	}
	agent_stop(&a, &A);
	unlink(A.keybag);
}

/* Root hands the key only to the agent it trusts (peer.c): an impostor on the socket (another
 * executable) and the trusted one started with LD_PRELOAD still get the session, but never the key,
 * at auth or at open_session; the trusted one, started cleanly, gets it. */
static void test_only_the_real_agent(void)
{
	static const struct {
		enum stand_in_kind kind;
		const char *what, *want_auth, *want_session;
	} cases[] = {
		{ IMPOSTOR, "an impostor", "", "O" },
		{ PRELOADED, "the agent under LD_PRELOAD", "", "O" },
		{ GENUINE, "the real agent", "K", "O" },
	};
	struct agent a;
	pam_handle_t *h;
	size_t i;

	put_keybag(&A, "pw-A", 0, 0, 0);
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		agent_start_as(&a, &A, cases[i].kind);
		h = begin(&A);
		become(h, &A);
		CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
		CHECK(strcmp(agent_ops(&a), cases[i].want_auth) == 0, "%s: auth", cases[i].what);
		pam_open_session(h, 0);
		CHECK(strcmp(agent_ops(&a), cases[i].want_session) == 0, "%s: session", cases[i].what);
		pam_end(h, PAM_SUCCESS);
		agent_stop(&a, &A);
	}
	unlink(A.keybag);
}

/* pam_systemd's XDG_SESSION_ID goes to the agent with the session (sessionOpenWithDetails); the
 * stand-in answers as an agent that predates it, and the module registers the session again without
 * it on the same connection. An id logind would not make is not sent at all. */
static void test_logind_session_id(void)
{
	static const char *const bad[] = { "XDG_SESSION_ID=", "XDG_SESSION_ID=c-5",
		                           "XDG_SESSION_ID=c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c" };
	struct agent a;
	pam_handle_t *h;
	size_t i;

	agent_start(&a, &A);
	h = begin(&A);
	become(h, &A);
	CHECK(pam_putenv(h, "XDG_SESSION_ID=c5") == PAM_SUCCESS && pam_open_session(h, 0) == PAM_SUCCESS,
	      "open_session");
	CHECK(strcmp(agent_ops(&a), "DO") == 0, "want sessionOpenWithDetails with c5, then sessionOpen");
	pam_end(h, PAM_SUCCESS);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		h = begin(&A);
		become(h, &A);
		CHECK(pam_putenv(h, bad[i]) == PAM_SUCCESS && pam_open_session(h, 0) == PAM_SUCCESS, "open_session");
		CHECK(strcmp(agent_ops(&a), "O") == 0, "%s: want sessionOpen alone", bad[i]);
		pam_end(h, PAM_SUCCESS);
	}
	agent_stop(&a, &A);
}

/* No XDG_RUNTIME_DIR in the PAM environment (su -, sudo -u, cron): the agent in /run/user/UID/latchkey
 * when logind made /run/user/UID (the user's, mode exactly 0700, not a symlink), as the Swift client
 * and the agent it starts choose (AgentEndpoint.current); /tmp/latchkey-UID otherwise. */
static void test_user_runtime_dir(void)
{
	struct who w = A;
	struct agent a;
	pam_handle_t *h;
	int made_root = 0, made_dir = 0;

	snprintf(w.run, sizeof w.run, "/run/user/%lu", (unsigned long)A.uid);
	if (!exists("/run/user"))
		made_root = mkdir("/run/user", 0755) == 0;
	if (!exists(w.run))
		made_dir = private_dir(w.run, &A) == 0;
	if (!made_dir) {
		printf("  (%s exists already: /run/user checks skipped)\n", w.run);
		goto out;
	}
	agent_start(&a, &w);
	h = begin(&A);
	CHECK(pam_set_item(h, PAM_USER, A.name) == PAM_SUCCESS && pam_open_session(h, 0) == PAM_SUCCESS,
	      "open_session");
	CHECK(strcmp(agent_ops(&a), "O") == 0, "the agent in %s/latchkey did not get the session", w.run);
	pam_end(h, PAM_SUCCESS);
	/* Not as logind makes it: another mode, or another owner. */
	CHECK(chmod(w.run, 0750) == 0, "chmod");
	h = begin(&A);
	CHECK(pam_set_item(h, PAM_USER, A.name) == PAM_SUCCESS, "set user");
	pam_open_session(h, 0);
	CHECK(strcmp(agent_ops(&a), "") == 0, "the agent in a %s of mode 0750 got the session", w.run);
	pam_end(h, PAM_SUCCESS);
	CHECK(chmod(w.run, 0700) == 0 && chown(w.run, B.uid, B.gid) == 0, "chown");
	h = begin(&A);
	CHECK(pam_set_item(h, PAM_USER, A.name) == PAM_SUCCESS, "set user");
	pam_open_session(h, 0);
	CHECK(strcmp(agent_ops(&a), "") == 0, "the agent in a %s of another user got the session", w.run);
	pam_end(h, PAM_SUCCESS);
	agent_stop(&a, &w);
out:
	if (made_dir)
		CHECK(rmdir(w.run) == 0, "remove %s", w.run);
	if (made_root)
		rmdir("/run/user");
}

/* The agent the module starts finds another one holding the socket's lock (readiness byte 2) and
 * exits: that one may still be opening the keychain, so the module waits (within its 5 s) until it
 * listens, and then registers the session and hands it the key. */
static void test_another_agent_listens(void)
{
	const char *ops;
	char flag[320];
	struct agent a;
	pam_handle_t *h;

	put_keybag(&A, "pw-A", 0, 0, 0);
	snprintf(flag, sizeof flag, "%s/another-agent", A.keychain);
	touch_as(flag, &A);
	agent_start_as(&a, &A, LATE);
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
	CHECK(pam_open_session(h, 0) == PAM_SUCCESS, "open_session");
	agent_wait(&a, &A, 10000);
	ops = agent_ops(&a);
	CHECK(strcmp(ops, "OK") == 0, "the agent that listened late: want sessionOpen, then keyHandoff, got '%s'", ops);
	pam_end(h, PAM_SUCCESS);
	agent_stop(&a, &A);
	unlink(flag);
	unlink(A.keybag);
}

/* An agent on its way out (stopped, its last threads still exiting) holds the socket's lock but will
 * never listen. The agent the module starts finds the lock held, says so (byte 2) and exits; once the
 * lock is free the module starts another, which serves, instead of waiting out its 5 s for a socket
 * that never comes (the keychain would stay locked after the login). */
static void test_exiting_agent_holds_the_lock(void)
{
	char flag[320], sockdir[300], path[400], ops[16] = "", c = 0;
	pam_handle_t *h;
	pid_t holder, served = 0;
	int p[2], fd, i, status;
	ssize_t n;
	FILE *f;

	put_keybag(&A, "pw-A", 0, 0, 0);
	snprintf(flag, sizeof flag, "%s/serve", A.keychain);
	touch_as(flag, &A);
	snprintf(sockdir, sizeof sockdir, "%s/latchkey", A.run);
	CHECK(pipe(p) == 0, "pipe");
	if ((holder = lk_fork_quiet()) == 0) {
		close(p[0]);
		snprintf(path, sizeof path, "%s/agent.lock", sockdir);
		if (lk_drop_privileges(&A.user) != 0 || mkdir(sockdir, 0700) != 0 ||
		    (fd = open(path, O_RDWR | O_CREAT, 0600)) < 0 || flock(fd, LOCK_EX) != 0 ||
		    write(p[1], "H", 1) != 1)
			_exit(1);
		/* Until the module has started an agent (its log appears), and a moment more. */
		snprintf(path, sizeof path, "%s/agent.log", sockdir);
		for (i = 0; !exists(path) && i < 1000; i++)
			usleep(10000);
		usleep(300000);
		_exit(0);
	}
	close(p[1]);
	CHECK(holder > 0 && read(p[0], &c, 1) == 1 && c == 'H', "a process holds the socket's lock");
	close(p[0]);
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
	CHECK(pam_open_session(h, 0) == PAM_SUCCESS, "open_session");
	CHECK(holder > 0 && waitpid(holder, &status, __WALL) == holder && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "the lock's holder");
	snprintf(path, sizeof path, "%s/letters", A.keychain);
	if ((fd = open(path, O_RDONLY)) >= 0) {
		n = read(fd, ops, sizeof ops - 1);
		ops[n > 0 ? n : 0] = 0;
		close(fd);
	}
	CHECK(strcmp(ops, "OK") == 0,
	      "the agent started after the holder exited: want sessionOpen, keyHandoff, got '%s'", ops);
	pam_end(h, PAM_SUCCESS);
	snprintf(path, sizeof path, "%s/pid", A.keychain);
	if ((f = fopen(path, "r")) != NULL) {
		if (fscanf(f, "%d", &served) != 1)
			served = 0;
		fclose(f);
	}
	if (served > 0)
		kill(served, SIGKILL);
	unlink(path);
	snprintf(path, sizeof path, "%s/letters", A.keychain);
	unlink(path);
	unlink(flag);
	unlink(A.keybag);
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof path, "%s/%s", sockdir,
		         i == 0   ? "agent.sock"
		         : i == 1 ? "agent.log"
		                  : "agent.lock");
		unlink(path);
	}
	CHECK(rmdir(sockdir) == 0, "remove %s", sockdir);
}

/* An agent that refuses the session gets no key: nothing would count the login, so nothing would
 * lock the keychain at logout. */
static void test_refused_session_gets_no_key(void)
{
	const char *ops;
	struct agent a;
	pam_handle_t *h;

	put_keybag(&A, "pw-A", 0, 0, 0);
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
	agent_start_as(&a, &A, REFUSING); /* only now, so the key is not delivered at auth already */
	pam_open_session(h, 0);
	ops = agent_ops(&a);
	CHECK(strcmp(ops, "O") == 0, "an agent that refused the session: want sessionOpen alone, got '%s'", ops);
	pam_end(h, PAM_SUCCESS);
	h = begin(&A);
	become(h, &A);
	CHECK(authenticate(h, "pw-A") == PAM_SUCCESS, "auth");
	CHECK(pam_putenv(h, "XDG_SESSION_ID=c5") == PAM_SUCCESS, "putenv");
	pam_open_session(h, 0);
	CHECK(strcmp(agent_ops(&a), "KD") == 0,
	      "refused with a logind id: want the key at auth, sessionOpenWithDetails");
	pam_end(h, PAM_SUCCESS);
	agent_stop(&a, &A);
	unlink(A.keybag);
}

/* The module running as the user (a screen locker that opens a session): the agent refuses session
 * requests from anyone but root, so none is sent; the key still goes to the running agent at auth. */
static void test_as_the_user(void)
{
	const char *ops;
	struct agent a;
	int status = -1;
	pid_t pid;

	put_keybag(&A, "pw-A", 0, 0, 0);
	agent_start(&a, &A);
	if ((pid = fork()) == 0) {
		pam_handle_t *h = NULL;
		int bad = 0;

		if (setgroups(1, &A.gid) != 0 || setresgid(A.gid, A.gid, A.gid) != 0 ||
		    setresuid(A.uid, A.uid, A.uid) != 0)
			_exit(100);
		bad |= pam_start_confdir(SERVICE, A.name, &conversation, confdir, &h) != PAM_SUCCESS;
		if (h != NULL) {
			become(h, &A);
			bad |= (authenticate(h, "pw-A") != PAM_SUCCESS) << 1;
			pam_open_session(h, 0);
			pam_close_session(h, 0);
			pam_end(h, PAM_SUCCESS);
		}
		_exit(bad);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "PAM as the user: status %#x", status);
	own_sigchld += pid > 0; /* an ordinary fork: its exit signals us */
	ops = agent_ops(&a);
	CHECK(strcmp(ops, "K") == 0, "as the user: want the key at auth and no session request, got '%s'", ops);
	agent_stop(&a, &A);
	unlink(A.keybag);
}

static int service_file(const char *service, const char *authtok, const char *module, const char *options,
                        const char *extra)
{
	char path[400];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", confdir, service);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fprintf(f, "auth required %s\nauth optional %s %s %s\nsession optional %s %s %s\n", authtok, module, options,
	        extra, module, options, extra);
	return fclose(f) == 0 ? 0 : -1;
}

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

static int setup(const char *module, const char *authtok)
{
	char path[400], options[1200];

	if (mkdtemp(top) == NULL || chmod(top, 0755) != 0)
		return -1;
	if (set_user(&A, "nobody") != 0 || set_user(&B, "daemon") != 0 || A.uid == B.uid)
		return 1;
	snprintf(confdir, sizeof confdir, "%s/pam.d", top);
	snprintf(path, sizeof path, "%s/kc", top);
	if (mkdir(confdir, 0755) != 0 || mkdir(path, 0755) != 0 || private_dir(A.keychain, &A) != 0 ||
	    private_dir(B.keychain, &B) != 0 || private_dir(A.run, &A) != 0 || private_dir(B.run, &B) != 0)
		return -1;
	/* The agent the module trusts: a copy of this program where only root can change it. */
	snprintf(path, sizeof path, "%s/bin", top);
	snprintf(agent_copy, sizeof agent_copy, "%s/bin/agent", top);
	if (mkdir(path, 0755) != 0 || copy_file("/proc/self/exe", agent_copy, 0755) != 0)
		return -1;
	snprintf(options, sizeof options,
	         "keychain=%s/kc/%%u agent=%s machine_secret=%s/machine/secret "
	         "allow_weak_argon2 argon2_t=1 argon2_m=8192 argon2_p=1 auto_create debug",
	         top, agent_copy, top);
	return service_file(SERVICE, authtok, module, options, "") == 0 &&
	                       service_file(SERVICE "-off", authtok, module, options,
	                                    "only_services=login,sshd," SERVICE "-o") == 0 &&
	                       service_file(SERVICE "-on", authtok, module, options,
	                                    "only_services=login," SERVICE "-on,sshd") == 0
	               ? 0
	               : -1;
}

int main(int argc, char **argv)
{
	char module[PATH_MAX], authtok[PATH_MAX], cmd[400];
	struct sigaction sa;
	int rc, status;

	if (argc == 5 && strcmp(argv[1], "--stand-in") == 0)
		return stand_in(atoi(argv[2]), atoi(argv[3]), strcmp(argv[4], "refuse") == 0);
	if (argc == 4 && strcmp(argv[1], "--daemon") == 0)
		return started_agent(argv[3]); /* started by the module: see started_agent */
	if (argc != 3 || realpath(argv[1], module) == NULL || realpath(argv[2], authtok) == NULL) {
		fprintf(stderr, "usage: test_pam pam_latchkey.so test_authtok.so\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0); /* the FAIL lines survive the alarm */
	if (geteuid() != 0) {
		printf("test_pam: skipped (needs root: the module acts as other users)\n");
		return 0;
	}
	alarm(120); /* a hang (an Argon2 run beyond the limits, a child waited for forever) fails the test */
	/* A harmless library to preload: the stand-in for pam_unix. */
	snprintf(preload, sizeof preload, "LD_PRELOAD=%s", authtok);
	if ((rc = setup(module, authtok)) != 0) {
		printf("test_pam: %s\n", rc > 0 ? "skipped (needs the users nobody and daemon)" : "setup failed");
		return rc > 0 ? 0 : 1;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigchld;
	sigaction(SIGCHLD, &sa, NULL);

	test_verified_key_stays_with_its_user();
	test_mismatch_stays_with_its_user();
	test_create_stays_with_its_user();
	test_limits();
	test_only_services();
	test_only_the_real_agent();
	test_logind_session_id();
	test_user_runtime_dir();
	test_another_agent_listens();
	test_exiting_agent_holds_the_lock();
	test_refused_session_gets_no_key();
	test_as_the_user();

	CHECK(sigchld_seen == own_sigchld, "the application's SIGCHLD handler ran %d times for the module",
	      (int)sigchld_seen - own_sigchld);
	CHECK(sigaction(SIGCHLD, NULL, &sa) == 0 && sa.sa_handler == on_sigchld, "SIGCHLD disposition changed");
	CHECK(waitpid(-1, &status, WNOHANG | __WALL) == -1 && errno == ECHILD, "a child of the module is left behind");
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	CHECK(system(cmd) == 0, "cleanup");
	printf("test_pam: %d checks, %d failed\n", checks, failures);
	return failures == 0 ? 0 : 1;
}
