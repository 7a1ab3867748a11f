/* pam_latchkey internal interfaces. Nothing here is exported from the module (pam_latchkey.map). */
#ifndef LATCHKEY_H
#define LATCHKEY_H

#include "keybag_limits.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define LK_HIDDEN __attribute__((visibility("hidden")))

/* docs/KEYBAG.md, "File format". */
enum {
	LK_KEY_LEN = 32,
	LK_ID_LEN = 16,
	LK_SALT_LEN = 16,
	LK_NONCE_LEN = 12,
	LK_WRAPPED_LEN = 60, /* nonce (12) || ciphertext (32) || tag (16) */
	LK_CLASSES = 7,
	LK_KEYBAG_SIZE = 580,
	LK_FLAG_DEVICE_BOUND = 0x0001
};

/* Results of the keybag functions. Never a password-dependent value except LK_WRONG_PASSWORD. */
enum lk_result {
	LK_OK = 0,
	LK_NOT_KEYBAG,
	LK_CORRUPT,
	LK_UNSUPPORTED,
	LK_WRONG_PASSWORD,
	LK_BAD_PARAMETERS,
	LK_NO_DEVICE_FACTOR, /* a device-bound keybag needs DF and none was given */
	LK_CRYPTO_ERROR
};

/* A parsed keybag: public fields only. Holds the always seed, so it is wiped after use. */
struct lk_keybag {
	uint16_t flags;
	uint8_t id[LK_ID_LEN];
	uint32_t t, m, p;
	uint8_t salt[LK_SALT_LEN];
	uint8_t verifier[LK_KEY_LEN];
	uint8_t seed[LK_KEY_LEN];
	uint8_t wrapped[LK_CLASSES][LK_WRAPPED_LEN]; /* index c - 1 */
};

/* keybag.c: format and crypto (docs/KEYBAG.md plus the device factor). */
LK_HIDDEN void lk_wipe(void *p, size_t n);
LK_HIDDEN int lk_random(void *p, size_t n);
LK_HIDDEN const char *lk_result_text(enum lk_result r);
LK_HIDDEN int lk_params_ok(uint32_t t, uint32_t m, uint32_t p, int creating, int allow_weak);
LK_HIDDEN int lk_params_pam_ok(uint32_t t, uint32_t m, uint32_t p);
LK_HIDDEN enum lk_result lk_parse(const uint8_t *buf, size_t len, struct lk_keybag *kb, const char **reason);
LK_HIDDEN void lk_serialize(const struct lk_keybag *kb, uint8_t out[LK_KEYBAG_SIZE]);
LK_HIDDEN int lk_master_key(const void *pw, size_t pwlen, const uint8_t salt[LK_SALT_LEN], uint32_t t, uint32_t m,
                            uint32_t p, uint8_t out[LK_KEY_LEN]);
LK_HIDDEN int lk_verifier(const uint8_t master[LK_KEY_LEN], uint8_t out[LK_KEY_LEN]);
LK_HIDDEN enum lk_result lk_check_master(const struct lk_keybag *kb, const uint8_t master[LK_KEY_LEN]);
LK_HIDDEN int lk_device_factor(const uint8_t ms[LK_KEY_LEN], uint32_t uid, const uint8_t id[LK_ID_LEN],
                               uint8_t out[LK_KEY_LEN]);
LK_HIDDEN enum lk_result lk_class_kek(const struct lk_keybag *kb, int c, const uint8_t *master, const uint8_t *df,
                                      uint8_t out[LK_KEY_LEN]);
LK_HIDDEN int lk_wrap(const uint8_t kek[LK_KEY_LEN], const uint8_t id[LK_ID_LEN], int c,
                      const uint8_t nonce[LK_NONCE_LEN], const uint8_t ck[LK_KEY_LEN], uint8_t out[LK_WRAPPED_LEN]);
LK_HIDDEN int lk_unwrap(const uint8_t kek[LK_KEY_LEN], const uint8_t id[LK_ID_LEN], int c,
                        const uint8_t in[LK_WRAPPED_LEN], uint8_t ck[LK_KEY_LEN]);
LK_HIDDEN enum lk_result lk_build(struct lk_keybag *kb, const uint8_t master[LK_KEY_LEN], const uint8_t *df,
                                  const uint8_t ck[LK_CLASSES][LK_KEY_LEN],
                                  const uint8_t nonces[LK_CLASSES][LK_NONCE_LEN]);
LK_HIDDEN enum lk_result lk_create(struct lk_keybag *kb, const uint8_t master[LK_KEY_LEN],
                                   const uint8_t salt[LK_SALT_LEN], uint32_t t, uint32_t m, uint32_t p,
                                   const uint8_t *ms, uint32_t uid);
LK_HIDDEN enum lk_result lk_change_password(const struct lk_keybag *old, const uint8_t old_master[LK_KEY_LEN],
                                            const uint8_t *df, const void *pw, size_t pwlen, struct lk_keybag *out);

/* lk_write_atomic: the file is in place but the directory fsync failed (not undone; logged). */
enum { LK_DIR_NOT_SYNCED = 249 };

/* files.c: file access. All of it is async-signal-safe, so it may run in a child forked from a
 * threaded process. Return 0 or an errno value. */
LK_HIDDEN int lk_read_user_file(const char *path, uid_t owner, uint8_t *buf, size_t cap, size_t *len);
LK_HIDDEN int lk_write_atomic(const char *path, const char *tmp_suffix, const uint8_t *buf, size_t len, int replace);
LK_HIDDEN int lk_mkdirs(const char *path, mode_t mode);
LK_HIDDEN int lk_machine_secret(const char *path, uint8_t out[LK_KEY_LEN]);
LK_HIDDEN void lk_tmp_suffix(char out[17]);

/* handoff.c: the agent's socket (docs/PROTOCOL.md and the hand-off opcodes). */
enum { LK_OP_HELLO = 0x01 }; /* answered to root too: how peer.c learns who serves the socket */
enum { LK_OP_KEY_HANDOFF = 0x30, LK_OP_SESSION_OPEN = 0x31, LK_OP_SESSION_CLOSE = 0x32, LK_TOKEN_LEN = 16 };
/* sessionOpenWithDetails: the token, then {"logind": XDG_SESSION_ID} (at most LK_LOGIND_ID_MAX letters and
 * digits); an agent that predates it answers LK_STATUS_UNIMPLEMENTED (errSecUnimplemented). */
enum { LK_OP_SESSION_OPEN_DETAILS = 0x33, LK_LOGIND_ID_MAX = 32, LK_STATUS_UNIMPLEMENTED = -4 };

struct lk_user {
	const char *name;
	uid_t uid;
	gid_t gid;
	const char *home;
	gid_t *groups;
	int ngroups;
};

/* Every request to the agent (write and read together) must finish within this time. */
enum { LK_CALL_TIMEOUT_MS = 5000 };

/* How long an agent started on demand may take to listen; lk_agent_start's LK_AGENT_ANOTHER: the agent
 * started found another one holding the socket's lock (readiness byte 2), which listens, or will; at most
 * LK_AGENT_MAX_STARTS agents for one connection (more only when that holder exits without listening). */
enum { LK_AGENT_START_TIMEOUT_MS = 5000, LK_AGENT_ANOTHER = 1, LK_AGENT_MAX_STARTS = 4 };

LK_HIDDEN int lk_agent_connect(const char *sockdir, uid_t uid, const char **why);
LK_HIDDEN int lk_agent_lock_held(const char *sockdir, uid_t uid);
LK_HIDDEN int lk_agent_call(int fd, int opcode, const uint8_t *body, size_t len, int32_t *status);
LK_HIDDEN int lk_agent_hello(int fd, uid_t uid, pid_t *pid);
LK_HIDDEN int lk_agent_trusted(const char *path, char *resolved, size_t cap, const char **why);
LK_HIDDEN int lk_agent_start(const struct lk_user *u, const char *agent, const char *keychain, const char *sockdir,
                             const char *runtime_env, const char **why);

/* peer.c: whether the process serving the connection `fd` is the real agent, as root can tell: 0, or
 * -1 with `why` (and `*pid`, the process that answered, or 0). Before every key hand-off by root. */
LK_HIDDEN int lk_agent_genuine(int fd, const char *agent, uid_t uid, pid_t *pid, const char **why);

/* child.c: children of the login process. The module runs inside someone else's program, so a
 * child never touches the application's SIGCHLD (lk_fork_quiet), starts from a clean slate before it
 * becomes the user (lk_child_reset, lk_drop_privileges), and is never waited for beyond a deadline
 * (the user can stop it, or it can sit on a hung network file system): lk_read_until, lk_reap.
 * Deadlines are CLOCK_MONOTONIC milliseconds (lk_now_ms). */
enum { LK_KILL_GRACE_MS = 1000 };

LK_HIDDEN int64_t lk_now_ms(void);
LK_HIDDEN pid_t lk_fork_quiet(void);
LK_HIDDEN void lk_child_reset(int keep_fd);
LK_HIDDEN int lk_drop_privileges(const struct lk_user *u);
LK_HIDDEN int lk_read_until(int fd, uint8_t *buf, size_t cap, size_t *len, int64_t deadline);
LK_HIDDEN int lk_reap(pid_t pid, int64_t deadline, int *status);

#endif
