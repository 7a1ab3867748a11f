/* pam_latchkey: unlocks the latchkey keychain with the login password.
 *
 * auth     derives the master key M from PAM_AUTHTOK and the user's keybag (read as the user),
 *          checks it against the verifier, and keeps only M and the device factor DF (pam_set_data),
 *          bound to the user's uid and name; a running agent (a screen locker) gets them at once.
 * session  registers the session with the agent under a random token (starting the agent as the
 *          user when none runs), then hands it M and DF, if auth kept them for this same user and
 *          the agent counts the session; unregisters the session on close. As the user (a screen
 *          locker) it registers nothing: the agent takes session requests from root alone.
 * password re-wraps the password classes under the new password (same class keys), as the user.
 *
 * The module never authenticates anyone and never fails a login: every problem is logged and
 * answered with PAM_IGNORE. It never keeps the password; every copy of a key is wiped. */
#include "module.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <security/pam_ext.h>
#include <security/pam_modules.h>

enum marker_reason { MARK_LOGIN, MARK_NO_OLD, MARK_OLD_WRONG, MARK_FAILED };
static const char *const marker_text[] = {
	"the login password did not open the keychain at a login",
	"the login password changed without the old password",
	"the login password changed and the old password did not open the keychain",
	"the login password changed but the keychain could not be re-wrapped",
};

/* ---- keybag, device factor, marker ---- */

/* 0 with `kb` filled, ENOENT when there is no keybag, -1 on any other problem (logged). */
static int read_keybag(struct ctx *c, struct lk_keybag *kb)
{
	struct job *j = calloc(1, sizeof *j);
	const char *reason = "";
	enum lk_result r;
	int rc;

	if (j == NULL)
		return -1;
	j->kind = JOB_READ, j->path = c->keybag;
	rc = as_user(c, j);
	if (rc == ENOENT) {
		DEBUG(c, "no keybag at %s", c->keybag);
	} else if (rc != 0) {
		LOG(c, LOG_ERR, "cannot read %s: %s", c->keybag, job_errtext(rc));
		rc = -1;
	} else if ((r = lk_parse(j->out, j->out_len, kb, &reason)) != LK_OK) {
		LOG(c, LOG_ERR, "%s: %s%s%s", c->keybag, lk_result_text(r), *reason ? ": " : "", reason);
		rc = -1;
	} else if (!lk_params_pam_ok(kb->t, kb->m, kb->p)) {
		/* The file is the user's: its Argon2 cost must not be able to hang or starve a root process. */
		LOG(c, LOG_WARNING,
		    "%s: Argon2 parameters t=%u m=%u KiB p=%u exceed the module's limits "
		    "(t <= %d, m <= %d KiB, p <= %d): not using this keychain",
		    c->keybag, kb->t, kb->m, kb->p, LK_PAM_MAX_T, LK_PAM_MAX_M_KIB, LK_PAM_MAX_P);
		lk_wipe(kb, sizeof *kb);
		rc = -1;
	}
	lk_wipe(j, sizeof *j);
	free(j);
	return rc;
}

/* DF for this user and keybag id, from the machine secret (root only; created on first use). */
static int device_factor(struct ctx *c, const uint8_t id[LK_ID_LEN], uint8_t df[LK_KEY_LEN])
{
	uint8_t ms[LK_KEY_LEN];
	int rc;

	if (geteuid() != 0) {
		DEBUG(c, "not running as root: no device factor");
		return -1;
	}
	if ((rc = lk_machine_secret(c->opt.machine_secret, ms)) != 0) {
		LOG(c, LOG_ERR, "machine secret %s unusable (%s): no device factor", c->opt.machine_secret,
		    rc == EPERM ? "not a root-owned 0600 file of 32 bytes in a root-owned directory" : strerror(rc));
		return -1;
	}
	rc = lk_device_factor(ms, (uint32_t)c->user.uid, id, df);
	lk_wipe(ms, sizeof ms);
	return rc;
}

static void write_marker(struct ctx *c, enum marker_reason why)
{
	char text[256], date[32], suffix[17];
	struct job *j = calloc(1, sizeof *j);
	time_t now = time(NULL);
	struct tm tm;
	int n, rc;

	if (j == NULL)
		return;
	if (gmtime_r(&now, &tm) == NULL || strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(date, sizeof date, "unknown date");
	n = snprintf(text, sizeof text, "%s (%s); run 'latchkey passwd'\n", marker_text[why], date);
	lk_tmp_suffix(suffix);
	j->kind = JOB_MARKER, j->path = c->marker, j->dir = c->keychain, j->suffix = suffix;
	j->data = (const uint8_t *)text, j->len = n > 0 && (size_t)n < sizeof text ? (size_t)n : strlen(text);
	if ((rc = as_user(c, j)) != 0)
		LOG(c, LOG_ERR, "cannot write %s: %s", c->marker, job_errtext(rc));
	else
		LOG(c, LOG_NOTICE, "keychain of %s is out of step: %s", c->user.name, marker_text[why]);
	free(j);
}

static void remove_marker(struct ctx *c)
{
	struct job *j = calloc(1, sizeof *j);
	int rc;

	if (j == NULL)
		return;
	j->kind = JOB_UNLINK, j->path = c->marker;
	if ((rc = as_user(c, j)) != 0)
		LOG(c, LOG_ERR, "cannot remove %s: %s", c->marker, job_errtext(rc));
	free(j);
}

/* ---- the stash and the session token ---- */

/* Records the current user as the owner; -1 for a name too long to record (then nothing is kept). */
static int owner_set(struct ctx *c, struct owner *o)
{
	size_t n = strlen(c->user.name);

	if (n >= sizeof o->name) {
		LOG(c, LOG_ERR, "user name too long: nothing kept for the session");
		return -1;
	}
	o->uid = c->user.uid;
	memcpy(o->name, c->user.name, n + 1);
	return 0;
}

/* Whether data recorded for `o` may be used for the current PAM_USER: same uid and same name. */
static int owner_is_user(struct ctx *c, const struct owner *o, const char *what)
{
	if (o->uid == c->user.uid && strncmp(o->name, c->user.name, sizeof o->name) == 0)
		return 1;
	LOG(c, LOG_NOTICE, "%s belongs to %s (uid %lu), but PAM_USER is now %s (uid %lu): dropped, not used", what,
	    o->name, (unsigned long)o->uid, c->user.name, (unsigned long)c->user.uid);
	return 0;
}

/* Forgets (and, through its cleanup function, wipes) what pam_set_data holds under `key`. */
static void drop_data(pam_handle_t *pamh, const char *key)
{
	const void *data = NULL;

	if (pam_get_data(pamh, key, &data) == PAM_SUCCESS && data != NULL &&
	    pam_set_data(pamh, key, NULL, NULL) != PAM_SUCCESS)
		pam_syslog(pamh, LOG_AUTHPRIV | LOG_ERR, "cannot drop %s", key);
}

static void stash_cleanup(pam_handle_t *pamh, void *data, int error_status)
{
	(void)pamh, (void)error_status;
	lk_wipe(data, sizeof(struct stash));
	free(data);
}

static void stash_keep(struct ctx *c, const struct stash *s)
{
	struct stash *copy = malloc(sizeof *copy);

	if (copy == NULL)
		return;
	*copy = *s;
	if (owner_set(c, &copy->owner) != 0) {
		stash_cleanup(c->pamh, copy, 0);
		return;
	}
	if (pam_set_data(c->pamh, DATA_KEY, copy, stash_cleanup) != PAM_SUCCESS) {
		LOG(c, LOG_ERR, "pam_set_data failed");
		stash_cleanup(c->pamh, copy, 0);
	}
}

/* M for a keychain that does not exist yet: a fresh salt and the configured parameters. */
static int derive_for_create(struct ctx *c, const char *pw, struct stash *s)
{
	memset(s, 0, sizeof *s);
	s->t = c->opt.t, s->m = c->opt.m, s->p = c->opt.p;
	if (lk_random(s->salt, sizeof s->salt) != 0 ||
	    lk_master_key(pw, strlen(pw), s->salt, s->t, s->m, s->p, s->master) != 0) {
		LOG(c, LOG_ERR, "Argon2id derivation failed");
		lk_wipe(s, sizeof *s);
		return -1;
	}
	s->state = STASH_CREATE;
	return 0;
}

/* auto_create: writes a new device-bound keybag (unbound when there is no machine secret) as the
 * user, never over one that appeared meanwhile. On success `s` holds M and DF for the hand-off. */
static int create_keybag(struct ctx *c, struct stash *s)
{
	struct lk_keybag kb;
	struct job *j = calloc(1, sizeof *j);
	uint8_t ms[LK_KEY_LEN], file[LK_KEYBAG_SIZE];
	char suffix[17];
	int have_ms = 0, rc = -1;
	enum lk_result r;

	s->state = STASH_NONE;
	if (j == NULL)
		return -1;
	if (geteuid() == 0) {
		have_ms = (rc = lk_machine_secret(c->opt.machine_secret, ms)) == 0;
		if (!have_ms)
			LOG(c, LOG_WARNING, "machine secret %s unusable (%s): creating an unbound keychain",
			    c->opt.machine_secret, rc == EPERM ? "bad owner, mode or size" : strerror(rc));
	}
	r = lk_create(&kb, s->master, s->salt, s->t, s->m, s->p, have_ms ? ms : NULL, (uint32_t)c->user.uid);
	if (r != LK_OK) {
		LOG(c, LOG_ERR, "cannot create a keybag: %s", lk_result_text(r));
		rc = -1;
		goto out;
	}
	s->has_df = have_ms && lk_device_factor(ms, (uint32_t)c->user.uid, kb.id, s->df) == 0;
	lk_wipe(ms, sizeof ms); /* before the child that runs as the user gets a copy of this stack */
	lk_serialize(&kb, file);
	lk_tmp_suffix(suffix);
	j->kind = JOB_CREATE, j->path = c->keybag, j->dir = c->keychain, j->database = c->database;
	j->suffix = suffix, j->data = file, j->len = sizeof file;
	if ((rc = as_user(c, j)) != 0) {
		LOG(c, rc == EEXIST ? LOG_NOTICE : LOG_ERR, "not creating %s: %s", c->keybag,
		    rc == EEXIST ? "a keybag appeared meanwhile" : job_errtext(rc));
		goto out;
	}
	LOG(c, LOG_NOTICE, "created the %skeychain of %s in %s", have_ms ? "device-bound " : "", c->user.name,
	    c->keychain);
	s->state = STASH_VERIFIED;
out:
	lk_wipe(&kb, sizeof kb);
	lk_wipe(ms, sizeof ms);
	lk_wipe(file, sizeof file);
	free(j);
	return rc;
}

/* ---- the agent ---- */

static int agent_connection(struct ctx *c, int start)
{
	const char *why = "";
	int fd = lk_agent_connect(c->sockdir, c->user.uid, &why), rc, starts;
	int64_t deadline = lk_now_ms() + LK_AGENT_START_TIMEOUT_MS;
	const struct timespec pause = { 0, 50 * 1000 * 1000 };

	if (fd == -2 && start) {
		for (starts = 1;; starts++) {
			rc = lk_agent_start(&c->user, c->opt.agent, c->keychain, c->sockdir,
			                    c->has_runtime ? c->runtime : NULL, &why);
			if (rc < 0) {
				LOG(c, LOG_WARNING, "cannot start %s for %s: %s", c->opt.agent, c->user.name, why);
				return -1;
			}
			fd = lk_agent_connect(c->sockdir, c->user.uid, &why);
			/* Another agent won the socket's lock and may still be opening the keychain before it
			 * listens: it gets what is left of the start's 5 s. The holder may also be an agent on its
			 * way out (stopped, its last threads exiting) that never listens: once the lock is free,
			 * start again, a few times at most (AgentClient.connectOrStart does the same). */
			while (rc == LK_AGENT_ANOTHER && fd == -2 && lk_now_ms() < deadline &&
			       (starts >= LK_AGENT_MAX_STARTS || lk_agent_lock_held(c->sockdir, c->user.uid))) {
				nanosleep(&pause, NULL);
				fd = lk_agent_connect(c->sockdir, c->user.uid, &why);
			}
			if (rc != LK_AGENT_ANOTHER || fd != -2 || lk_now_ms() >= deadline)
				break;
			DEBUG(c, "the agent that held %s/agent.lock exited without listening; starting another",
			      c->sockdir);
		}
		if (fd == -2 && rc == LK_AGENT_ANOTHER)
			LOG(c, LOG_WARNING, "another agent of %s holds %s/agent.lock but did not listen within 5 s",
			    c->user.name, c->sockdir);
	}
	if (fd == -2)
		DEBUG(c, "no agent listens in %s", c->sockdir);
	else if (fd < 0)
		LOG(c, LOG_ERR, "%s: %s", c->sockdir, why);
	return fd;
}

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24), b[1] = (uint8_t)(v >> 16), b[2] = (uint8_t)(v >> 8), b[3] = (uint8_t)v;
}

/* keyHandoff: secret M (32) || secret DF (32, or empty). */
static int handoff(struct ctx *c, int fd, const struct stash *s)
{
	uint8_t body[4 + LK_KEY_LEN + 4 + LK_KEY_LEN];
	const char *why = "";
	int32_t status = 0;
	pid_t pid = 0;
	int rc;

	/* As root, only to the real agent (peer.c). As the user (a screen locker) the module can see no
	 * more of the agent, which is not dumpable, than any other process of the user could. */
	if (geteuid() == 0 && lk_agent_genuine(fd, c->opt.agent, c->user.uid, &pid, &why) != 0) {
		LOG(c, LOG_ERR, "not handing the key of %s to the process (pid %ld) serving %s: %s", c->user.name,
		    (long)pid, c->sockdir, why);
		return -1;
	}
	put32(body, LK_KEY_LEN);
	memcpy(body + 4, s->master, LK_KEY_LEN);
	put32(body + 4 + LK_KEY_LEN, s->has_df ? LK_KEY_LEN : 0);
	if (s->has_df)
		memcpy(body + 8 + LK_KEY_LEN, s->df, LK_KEY_LEN);
	rc = lk_agent_call(fd, LK_OP_KEY_HANDOFF, body, s->has_df ? sizeof body : 8 + LK_KEY_LEN, &status);
	lk_wipe(body, sizeof body);
	if (rc != 0 || status != 0) {
		LOG(c, LOG_ERR, "key hand-off to the agent of %s failed (%s %d)", c->user.name,
		    rc != 0 ? "no answer" : "status", (int)status);
		return -1;
	}
	DEBUG(c, "handed the key of %s to the agent%s", c->user.name, s->has_df ? " with the device factor" : "");
	return 0;
}

static void token_cleanup(pam_handle_t *pamh, void *data, int error_status)
{
	(void)pamh, (void)error_status;
	lk_wipe(data, sizeof(struct token));
	free(data);
}

static int session_call(struct ctx *c, int fd, int opcode, const uint8_t token[LK_TOKEN_LEN])
{
	int32_t status = 0;

	if (lk_agent_call(fd, opcode, token, LK_TOKEN_LEN, &status) != 0 || status != 0) {
		LOG(c, LOG_ERR, "session %s for %s: agent %s %d", opcode == LK_OP_SESSION_OPEN ? "open" : "close",
		    c->user.name, status != 0 ? "status" : "did not answer", (int)status);
		return -1;
	}
	return 0;
}

/* logind's id for this session: XDG_SESSION_ID in the PAM environment, put there by pam_systemd, which
 * must come earlier in the session stack. Never the process's own XDG_SESSION_ID: that names the session
 * of whoever started the application (su or sudo run from a desktop), not this one. NULL when there is
 * none, or when it is not an id as logind makes them (1 to LK_LOGIND_ID_MAX letters and digits). */
static const char *logind_session(struct ctx *c)
{
	const char *id = pam_getenv(c->pamh, "XDG_SESSION_ID");
	size_t n;

	if (id == NULL)
		return NULL;
	for (n = 0; id[n] != '\0' && n < LK_LOGIND_ID_MAX; n++)
		if (!((id[n] >= '0' && id[n] <= '9') || (id[n] >= 'A' && id[n] <= 'Z') ||
		      (id[n] >= 'a' && id[n] <= 'z')))
			break;
	if (n == 0 || id[n] != '\0') {
		LOG(c, LOG_NOTICE, "XDG_SESSION_ID is not a logind session id: the agent is not told of it");
		return NULL;
	}
	return id;
}

/* Registers the session with its logind id (sessionOpenWithDetails: token || dictionary {"logind": id},
 * docs/PROTOCOL.md), so that the agent ends it when logind removes it; without an id, or for an agent
 * that predates that request (it answers errSecUnimplemented and keeps the connection), sessionOpen with
 * the token alone. Either way the agent also follows this process, and ends the session if it dies. */
static int session_register(struct ctx *c, int fd, const uint8_t token[LK_TOKEN_LEN])
{
	static const char key[] = "logind";
	uint8_t body[LK_TOKEN_LEN + 5 + 4 + sizeof key - 1 + 5 + LK_LOGIND_ID_MAX];
	const char *id = logind_session(c);
	size_t n, len = 0;
	int32_t status = 0;
	int rc;

	_Static_assert(sizeof body <= 2 * (4 + LK_KEY_LEN), "beyond lk_agent_call's body cap (a key hand-off)");
	if (id == NULL)
		return session_call(c, fd, LK_OP_SESSION_OPEN, token);
	n = strlen(id);
	memcpy(body, token, LK_TOKEN_LEN), len = LK_TOKEN_LEN;
	body[len] = 0x08, put32(body + len + 1, 1), len += 5; /* a dictionary of one entry */
	put32(body + len, sizeof key - 1), memcpy(body + len + 4, key, sizeof key - 1), len += 4 + sizeof key - 1;
	body[len] = 0x01, put32(body + len + 1, (uint32_t)n), memcpy(body + len + 5, id, n), len += 5 + n; /* string */
	rc = lk_agent_call(fd, LK_OP_SESSION_OPEN_DETAILS, body, len, &status);
	lk_wipe(body, sizeof body);
	if (rc == 0 && status == LK_STATUS_UNIMPLEMENTED) {
		DEBUG(c, "the agent of %s does not take logind session ids: registering the session without %s",
		      c->user.name, id);
		return session_call(c, fd, LK_OP_SESSION_OPEN, token);
	}
	if (rc != 0 || status != 0) {
		LOG(c, LOG_ERR, "session open for %s: agent %s %d", c->user.name, rc != 0 ? "did not answer" : "status",
		    (int)status);
		return -1;
	}
	DEBUG(c, "session of %s registered in logind session %s", c->user.name, id);
	return 0;
}

/* ---- entry points ---- */

PUBLIC int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	struct ctx *c;
	const void *tok = NULL;
	struct lk_keybag kb;
	struct stash s;
	enum lk_result r;
	int rc, fd;

	(void)flags;
	memset(&s, 0, sizeof s);
	memset(&kb, 0, sizeof kb);
	/* A new authentication (a retry, another user) replaces whatever an earlier one left. */
	drop_data(pamh, DATA_KEY);
	if ((c = ctx_new(pamh, argc, argv)) == NULL)
		return PAM_IGNORE;
	if (pam_get_item(pamh, PAM_AUTHTOK, &tok) != PAM_SUCCESS || tok == NULL) {
		DEBUG(c, "no PAM_AUTHTOK (pam_latchkey never prompts): nothing to do");
		goto out;
	}
	rc = read_keybag(c, &kb);
	if (rc == ENOENT && c->opt.auto_create && derive_for_create(c, tok, &s) == 0)
		stash_keep(c, &s); /* the session creates the keychain once the stack accepted the password */
	if (rc != 0)
		goto out;
	if (lk_master_key(tok, strlen(tok), kb.salt, kb.t, kb.m, kb.p, s.master) != 0) {
		LOG(c, LOG_ERR, "Argon2id derivation failed");
		goto out;
	}
	r = lk_check_master(&kb, s.master);
	if (r == LK_WRONG_PASSWORD) {
		LOG(c, LOG_NOTICE, "the password given for %s does not open their keychain", c->user.name);
		lk_wipe(&s, sizeof s);
		s.state = STASH_MISMATCH; /* the session writes the out-of-step marker, if it opens */
		stash_keep(c, &s);
		goto out;
	}
	if (r != LK_OK) {
		LOG(c, LOG_ERR, "cannot check the keychain password: %s", lk_result_text(r));
		goto out;
	}
	s.state = STASH_VERIFIED;
	s.has_df = device_factor(c, kb.id, s.df) == 0;
	/* An agent already running (a screen locker, a second login) gets the key now, and then the
	 * login process (a screen locker may live on) does not keep it at all. */
	if ((fd = agent_connection(c, 0)) >= 0) {
		if (handoff(c, fd, &s) == 0) {
			lk_wipe(s.master, sizeof s.master);
			lk_wipe(s.df, sizeof s.df);
			s.delivered = 1;
		}
		close(fd);
	}
	stash_keep(c, &s);
out:
	lk_wipe(&s, sizeof s);
	lk_wipe(&kb, sizeof kb);
	ctx_free(c);
	return PAM_IGNORE; /* never an authentication factor, whatever the stack's control flags */
}

PUBLIC int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	(void)pamh, (void)flags, (void)argc, (void)argv;
	return PAM_SUCCESS;
}

/* Registers the session under a new random token, kept (with its owner) for close_session. 0 when the
 * agent counts the session (even if the token could not be kept: the agent then ends the session
 * when this process exits), -1 when it does not. */
static int session_open(struct ctx *c, int fd)
{
	struct token *t = calloc(1, sizeof *t);

	if (t == NULL || owner_set(c, &t->owner) != 0 || lk_random(t->value, sizeof t->value) != 0 ||
	    session_register(c, fd, t->value) != 0) {
		token_cleanup(c->pamh, t, 0);
		return -1;
	}
	if (pam_set_data(c->pamh, DATA_TOKEN, t, token_cleanup) != PAM_SUCCESS) {
		LOG(c, LOG_ERR, "pam_set_data failed: the session of %s ends only when this process does",
		    c->user.name);
		token_cleanup(c->pamh, t, 0);
	}
	return 0;
}

PUBLIC int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	struct ctx *c = ctx_new(pamh, argc, argv);
	struct stash *s = NULL;
	struct lk_keybag kb;
	const void *data = NULL;
	int ret = PAM_IGNORE, fd, give, registered;

	(void)flags;
	if (c == NULL) {
		drop_data(pamh, DATA_KEY);
		return PAM_IGNORE;
	}
	if (pam_get_data(pamh, DATA_KEY, &data) == PAM_SUCCESS && data != NULL) {
		s = (struct stash *)(uintptr_t)data;
		/* Derived for another user (sudo authenticates the caller, then opens the target's session). */
		if (!owner_is_user(c, &s->owner, "the key derived at authentication")) {
			drop_data(pamh, DATA_KEY);
			s = NULL;
		}
	}
	/* Linux-PAM clears PAM_AUTHTOK when pam_authenticate returns, so only auth can derive the key
	 * of a new keychain (auto_create on the auth line); the session writes it (auto_create here). */
	memset(&kb, 0, sizeof kb);
	if (s == NULL && c->opt.auto_create && read_keybag(c, &kb) == ENOENT)
		LOG(c, LOG_NOTICE,
		    "no keychain for %s, and no key derived at authentication to create one "
		    "(auto_create must be on the auth line too)",
		    c->user.name);
	lk_wipe(&kb, sizeof kb);
	if (s != NULL && s->state == STASH_CREATE && c->opt.auto_create && create_keybag(c, s) == 0)
		ret = PAM_SUCCESS;
	if (s != NULL && s->state == STASH_MISMATCH)
		write_marker(c, MARK_LOGIN);
	if (s != NULL && s->state == STASH_VERIFIED)
		remove_marker(c);
	give = s != NULL && s->state == STASH_VERIFIED && !s->delivered;
	if ((fd = agent_connection(c, give)) >= 0) {
		/* The session first: once the agent counts it, the close of the user's last other session
		 * (racing with this login) can no longer lock the keys handed over next. As the user (a
		 * screen locker) there is none: the agent takes session requests from root alone, and the
		 * user's own process may unlock the user's keychain anyway, as auth does. */
		registered = geteuid() != 0 || session_open(c, fd) == 0;
		if (geteuid() == 0 && registered)
			ret = PAM_SUCCESS;
		else if (geteuid() != 0)
			DEBUG(c, "not running as root: the session of %s is not registered", c->user.name);
		/* A key handed over outside any session the agent counts would stay unlocked: no logout
		 * would ever lock it. */
		if (give && !registered)
			LOG(c, LOG_WARNING,
			    "the agent of %s did not register the session: the key is not handed over, so that "
			    "the keychain is not left unlocked with no session to lock it at logout",
			    c->user.name);
		else if (give && handoff(c, fd, s) == 0)
			ret = PAM_SUCCESS;
		if (s != NULL && s->state == STASH_VERIFIED && s->delivered)
			ret = PAM_SUCCESS;
		close(fd);
	}
	/* M has been delivered (or is of no use now): do not keep it for the rest of the session. */
	if (s != NULL)
		drop_data(pamh, DATA_KEY);
	ctx_free(c);
	return ret;
}

PUBLIC int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	const void *data = NULL;
	const struct token *t;
	struct ctx *c;
	int ret = PAM_IGNORE, fd;

	(void)flags;
	if (pam_get_data(pamh, DATA_TOKEN, &data) != PAM_SUCCESS || data == NULL)
		return PAM_IGNORE;
	t = data;
	if ((c = ctx_new(pamh, argc, argv)) == NULL) {
		drop_data(pamh, DATA_TOKEN);
		return PAM_IGNORE;
	}
	/* Only the agent of the user whose session was opened may hear of its close. */
	if (owner_is_user(c, &t->owner, "the session token") && (fd = agent_connection(c, 0)) >= 0) {
		if (session_call(c, fd, LK_OP_SESSION_CLOSE, t->value) == 0)
			ret = PAM_SUCCESS;
		close(fd);
	}
	drop_data(pamh, DATA_TOKEN);
	ctx_free(c);
	return ret;
}

PUBLIC int pam_sm_chauthtok(pam_handle_t *pamh, int flags, int argc, const char **argv)
{
	struct ctx *c;
	const void *old = NULL, *new = NULL;
	struct lk_keybag kb, next;
	struct job *j = NULL;
	uint8_t master[LK_KEY_LEN], df[LK_KEY_LEN], before[LK_KEYBAG_SIZE], after[LK_KEYBAG_SIZE];
	char suffix[17];
	enum marker_reason mark = MARK_FAILED;
	enum lk_result r;
	int ret = PAM_IGNORE, has_df = 0, rc;

	if (flags & PAM_PRELIM_CHECK)
		return PAM_SUCCESS;
	if (!(flags & PAM_UPDATE_AUTHTOK) || (c = ctx_new(pamh, argc, argv)) == NULL)
		return PAM_IGNORE;
	memset(&kb, 0, sizeof kb);
	memset(&next, 0, sizeof next);
	if (pam_get_item(pamh, PAM_OLDAUTHTOK, &old) != PAM_SUCCESS)
		old = NULL;
	if (pam_get_item(pamh, PAM_AUTHTOK, &new) != PAM_SUCCESS || new == NULL) {
		LOG(c, LOG_NOTICE, "no new password (PAM_AUTHTOK); keychain of %s left alone", c->user.name);
		goto done;
	}
	if (read_keybag(c, &kb) != 0)
		goto done; /* none, or unreadable or corrupt (logged): nothing to re-wrap */
	if (old == NULL) {
		mark = MARK_NO_OLD;
		goto out;
	}
	if (lk_master_key(old, strlen(old), kb.salt, kb.t, kb.m, kb.p, master) != 0)
		goto out;
	if ((r = lk_check_master(&kb, master)) != LK_OK) {
		mark = r == LK_WRONG_PASSWORD ? MARK_OLD_WRONG : MARK_FAILED;
		goto out;
	}
	if ((kb.flags & LK_FLAG_DEVICE_BOUND) && !(has_df = device_factor(c, kb.id, df) == 0))
		goto out;
	r = lk_change_password(&kb, master, has_df ? df : NULL, new, strlen(new), &next);
	if (r != LK_OK) {
		LOG(c, LOG_ERR, "cannot re-wrap the keychain of %s: %s", c->user.name, lk_result_text(r));
		goto out;
	}
	lk_serialize(&kb, before); /* parsing is canonical, so this is the file as read */
	lk_serialize(&next, after);
	lk_tmp_suffix(suffix);
	if ((j = calloc(1, sizeof *j)) == NULL)
		goto out;
	j->kind = JOB_REPLACE, j->path = c->keybag, j->suffix = suffix, j->data = after, j->len = sizeof after;
	j->expect = before, j->expect_len = sizeof before;
	if ((rc = as_user(c, j)) != 0) {
		LOG(c, LOG_ERR, "cannot write %s: %s", c->keybag, job_errtext(rc));
		goto out;
	}
	LOG(c, LOG_NOTICE, "keychain of %s re-wrapped for the new password", c->user.name);
	remove_marker(c);
	ret = PAM_SUCCESS;
out:
	if (ret != PAM_SUCCESS)
		write_marker(c, mark); /* the keybag is untouched: it still opens with the old password */
done:
	lk_wipe(master, sizeof master);
	lk_wipe(df, sizeof df);
	lk_wipe(&kb, sizeof kb);
	lk_wipe(&next, sizeof next);
	lk_wipe(before, sizeof before);
	lk_wipe(after, sizeof after);
	if (j != NULL)
		lk_wipe(j, sizeof *j);
	free(j);
	ctx_free(c);
	return ret;
}
