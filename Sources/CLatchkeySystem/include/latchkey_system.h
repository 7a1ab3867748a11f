#pragma once
/* The few Linux calls the agent needs that Swift's Glibc module does not expose (they need
 * _GNU_SOURCE). Kept in one small file so every privileged or process-level call is reviewable at once. */
#include <stdint.h>
#include <sys/types.h>

/* PR_SET_DUMPABLE 0: no core dumps, no ptrace attach by the same uid, /proc/PID/mem unreadable.
 * Returns 0 or -1 with errno. */
int latchkey_set_nondumpable(void);

/* SO_PEERCRED of a connected Unix socket. Returns 0 or -1 with errno. */
int latchkey_peer_credentials(int fd, int32_t *pid, uint32_t *uid, uint32_t *gid);

/* accept4 with SOCK_CLOEXEC. */
int latchkey_accept_cloexec(int fd);

/* The soft RLIMIT_MEMLOCK, in bytes (or -1). */
long long latchkey_memlock_limit(void);

/* Closes every descriptor from 3 up except the `count` ones in `keep` (inherited by accident from
 * whatever started the agent: a pipe left open would keep that program waiting for EOF forever). */
void latchkey_close_inherited_fds(const int *keep, int count);
