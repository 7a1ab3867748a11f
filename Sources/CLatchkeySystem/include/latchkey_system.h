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

/* Starts `path` (an absolute path, run with argv { path } and an empty environment) with `in_fd` as its
 * standard input, `out_fd` as its standard output, /dev/null as its standard error, every other
 * descriptor closed and the default signal dispositions and mask: a process of its own that copies
 * what it is given to a descriptor the agent must never write itself (one that may block in the
 * kernel whatever its flags). Returns the child's pid, or -1 with errno. Between fork and exec the
 * child calls only async-signal-safe functions. */
int latchkey_spawn_copier(const char *path, int in_fd, int out_fd);

/* pipe2(fds, O_CLOEXEC). */
int latchkey_pipe_cloexec(int fds[2]);

/* ---- Login processes: pidfds (Linux 5.3) and their exits ---- */

/* A pidfd (close-on-exec) for the process at the other end of a connected Unix socket, the one that
 * called connect(). `method` 0 asks the kernel (SO_PEERPIDFD, Linux 6.5): its reference was taken at
 * connect time, so no pid can have been reused. `method` 1 opens the SO_PEERCRED pid (pidfd_open) and
 * keeps the pidfd only if the connection is still open afterwards (see the .c file).
 * Returns the pidfd, or -1 with errno: ESRCH when the peer is gone, ENOPROTOOPT when the kernel does
 * not know SO_PEERPIDFD, ENOSYS when it has no pidfds, ENODATA when the socket records no peer. */
int latchkey_peer_pidfd(int fd, int method);

/* 1 when the process behind `pidfd` has exited (a zombie counts), 0 while it runs, -1 with errno. */
int latchkey_pidfd_exited(int pidfd);

/* An epoll set that reports the exits of the processes whose pidfds are added to it, each under a key:
 * create (close-on-exec; -1 with errno), add and remove (0 or -1 with errno), and wait, which blocks
 * until at least one has exited and stores up to `capacity` keys (their number, or -1 with errno). */
int latchkey_exit_watch_create(void);
int latchkey_exit_watch_add(int watch, int pidfd, uint64_t key);
int latchkey_exit_watch_remove(int watch, int pidfd);
int latchkey_exit_watch_wait(int watch, uint64_t *keys, int capacity);

/* Raises the soft RLIMIT_NOFILE to at least `wanted` descriptors (never above the hard limit, never
 * lowering it). Returns the soft limit in force afterwards, or -1 with errno. */
long long latchkey_raise_descriptor_limit(unsigned long long wanted);

/* ---- Who is calling: caller identity (docs/IDENTITY.md) ---- */

/* pidfd_open(pid, 0): a pidfd (close-on-exec) for whatever process has `pid` now; the caller must
 * confirm that it is the one it means. Returns the pidfd, or -1 with errno. */
int latchkey_pidfd_open(int32_t pid);

/* How many bytes wait unread in the receive queue of socket `fd` (SIOCINQ), or -1 with errno. */
int latchkey_socket_unread(int fd);

/* Turns SO_PASSCRED on for `fd`, so that reads can tell which process wrote each byte
 * (SCM_CREDENTIALS, filled in by the kernel when it was written). Returns 0 or -1 with errno. */
int latchkey_socket_pass_credentials(int fd);

/* The pid of the process that wrote the next unread byte of socket `fd` (which has SO_PASSCRED on),
 * looked at with MSG_PEEK, so the byte stays for the reader. Never waits. Returns 1 with `*pid` set,
 * 0 at end of file, -1 with errno (EAGAIN: nothing waits; ENODATA: no credentials came with it). */
int latchkey_socket_next_writer(int fd, int32_t *pid);

/* Whether this process runs with raised privilege (setuid, setgid or file capabilities: the kernel's
 * AT_SECURE), in which case its environment must choose no program to run. 1 or 0. */
int latchkey_secure_execution(void);
