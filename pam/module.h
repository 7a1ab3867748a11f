/* Private to pam_latchkey.so: the module's options, per-call context and the data it keeps
 * between PAM calls. The keybag format and the agent client are in latchkey.h. */
#ifndef PAM_LATCHKEY_MODULE_H
#define PAM_LATCHKEY_MODULE_H

#include "latchkey.h"

#include <sys/types.h>
#include <security/pam_ext.h>
#include <security/pam_modules.h>
#include <syslog.h>

#define PUBLIC __attribute__((visibility("default")))

#ifndef LATCHKEYD
#define LATCHKEYD "/usr/local/libexec/latchkey/latchkeyd"
#endif
#define DEFAULT_KEYCHAIN "%h/.local/share/latchkey"
#define DEFAULT_MACHINE_SECRET "/var/lib/latchkey/machine-secret"
#define DATA_KEY "pam_latchkey_key"
#define DATA_TOKEN "pam_latchkey_session"

enum { PATH_CAP = 4096, JOB_OUT_CAP = 4096, NAME_CAP = 256, DROP_FAILED = 250 };
/* A child doing file work as the user gets this long, in all, before it is killed. */
enum { FILE_TIMEOUT_MS = 10000 };
enum { DEFAULT_T = 2, DEFAULT_M = 262144, DEFAULT_P = 2 };

#define LOG(c, prio, ...) pam_syslog((c)->pamh, LOG_AUTHPRIV | (prio), __VA_ARGS__)
#define DEBUG(c, ...)                                   \
	do {                                            \
		if ((c)->opt.debug)                     \
			LOG(c, LOG_DEBUG, __VA_ARGS__); \
	} while (0)

struct options {
	int debug, auto_create, allow_weak;
	uint32_t t, m, p;
	const char *keychain, *agent, *runtime_dir, *machine_secret, *only_services;
};

/* Whose data it is: what auth and open_session leave is used only while PAM_USER is still the same
 * user (sudo, for one, changes PAM_USER between authentication and the session). */
struct owner {
	uid_t uid;
	char name[NAME_CAP];
};

/* What auth leaves for the session (pam_set_data): M and DF, never the password. */
enum stash_state { STASH_NONE, STASH_VERIFIED, STASH_MISMATCH, STASH_CREATE };
struct stash {
	struct owner owner;
	int state, has_df, delivered; /* delivered: a running agent took M at auth; M is wiped */
	uint8_t master[LK_KEY_LEN], df[LK_KEY_LEN];
	uint8_t salt[LK_SALT_LEN]; /* STASH_CREATE: M was derived with this salt and t, m, p */
	uint32_t t, m, p;
};

/* What open_session leaves for close_session. */
struct token {
	struct owner owner;
	uint8_t value[LK_TOKEN_LEN];
};

struct ctx {
	pam_handle_t *pamh;
	struct options opt;
	struct lk_user user;
	char *pwbuf;
	char keychain[PATH_CAP], keybag[PATH_CAP], marker[PATH_CAP], database[PATH_CAP];
	char sockdir[PATH_CAP], runtime[PATH_CAP];
	int has_runtime;
};

/* Work done as the user, in a forked child when we are root. */
enum job_kind { JOB_READ, JOB_REPLACE, JOB_CREATE, JOB_MARKER, JOB_UNLINK };
struct job {
	enum job_kind kind;
	const char *path, *dir, *database, *suffix;
	const uint8_t *data, *expect;
	size_t len, expect_len, out_len;
	uint8_t out[JOB_OUT_CAP];
};

/* context.c: options, the user, and the paths derived from them. */
/* userjob.c: runs `j` as the user; 0 or an errno value (DROP_FAILED, ETIMEDOUT, ESTALE, ...). */
int as_user(struct ctx *c, struct job *j);
/* A short reason for an as_user result, for the log. */
const char *job_errtext(int rc);

void ctx_free(struct ctx *c);
struct ctx *ctx_new(pam_handle_t *pamh, int argc, const char **argv);

#endif
