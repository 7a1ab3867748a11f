#define _GNU_SOURCE
#include "latchkey_system.h"

#include <stddef.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

int latchkey_set_nondumpable(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

int latchkey_peer_credentials(int fd, int32_t *pid, uint32_t *uid, uint32_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

int latchkey_accept_cloexec(int fd) {
    return accept4(fd, NULL, NULL, SOCK_CLOEXEC);
}

long long latchkey_memlock_limit(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_MEMLOCK, &limit) != 0) return -1;
    return (long long)limit.rlim_cur;
}

void latchkey_close_inherited_fds(const int *keep, int count) {
    /* Close the gaps between kept descriptors, lowest first; close_range where the kernel has it. */
    unsigned int from = 3;
    for (;;) {
        int next = -1;
        for (int i = 0; i < count; i++) {
            if (keep[i] >= (int)from && (next < 0 || keep[i] < next)) next = keep[i];
        }
        unsigned int to = next < 0 ? ~0U : (unsigned int)next - 1;
        if (to >= from) {
            if (syscall(SYS_close_range, from, to, 0) != 0) {
                long max = sysconf(_SC_OPEN_MAX);
                unsigned int last = (max > 0 && max < 1048576) ? (unsigned int)max - 1 : 65535;
                for (unsigned int fd = from; fd <= to && fd <= last; fd++) close((int)fd);
            }
        }
        if (next < 0) break;
        from = (unsigned int)next + 1;
    }
}

#include <errno.h>
#include <fcntl.h>
#include <signal.h>

int latchkey_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int latchkey_spawn_copier(const char *path, int in_fd, int out_fd) {
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null_fd < 0) return -1;
    pid_t pid = fork();
    if (pid != 0) {
        int saved = errno;
        close(null_fd);
        errno = saved;
        return pid < 0 ? -1 : (int)pid;
    }
    /* The child: async-signal-safe calls only. Descriptors first (dup2 clears close-on-exec), moving
     * the two we keep out of the way of each other, then everything above 2 closed. */
    int in = in_fd, out = out_fd;
    if (in == 1 || in == 2) in = fcntl(in, F_DUPFD, 3);
    if (out == 0 || out == 2) out = fcntl(out, F_DUPFD, 3);
    if (in < 0 || out < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(null_fd, 2) < 0) _exit(126);
    if (syscall(SYS_close_range, 3U, ~0U, 0) != 0) {
        for (int fd = 3; fd < 65536; fd++) close(fd);
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; sig++) (void)sigaction(sig, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    char *const argv[] = { (char *)path, NULL };
    char *const envp[] = { NULL };
    execve(path, argv, envp);
    _exit(127);
}

/* ---- Login processes ---- */

#include <errno.h>
#include <poll.h>
#include <sys/epoll.h>

/* Not in glibc 2.36's headers: the asm-generic value (x86, arm, arm64, riscv, powerpc, ...). PA-RISC and
 * SPARC number it differently, and guessing could read another option: there method 0 reports
 * ENOPROTOOPT and the agent uses method 1. */
#if !defined(SO_PEERPIDFD) && !defined(__hppa__) && !defined(__sparc__)
#define SO_PEERPIDFD 77
#endif

int latchkey_peer_pidfd(int fd, int method) {
    if (method == 0) {
#ifndef SO_PEERPIDFD
        errno = ENOPROTOOPT;
        return -1;
#else
        int pidfd = -1;
        socklen_t length = sizeof pidfd;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) != 0) {
            /* Kernels before 6.16 refuse a pidfd for a peer that was already reaped (EINVAL). */
            if (errno == EINVAL) errno = ESRCH;
            return -1;
        }
        if (length != sizeof pidfd || pidfd < 0) {
            errno = ENOPROTOOPT;
            return -1;
        }
        return pidfd;
#endif
    }
    struct ucred credentials;
    socklen_t length = sizeof credentials;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    if (credentials.pid <= 0) {
        errno = ENODATA;
        return -1;
    }
    int pidfd = (int)syscall(SYS_pidfd_open, credentials.pid, 0);
    if (pidfd < 0) return -1;
    /* A pid is only a number, reused once its process is reaped: the pidfd names the peer only if the peer
     * was still alive when it was opened. SO_PEERCRED cannot tell (it is fixed at connect time), but the
     * connection can: the peer holds its end for as long as it lives (pam_latchkey never shares it), and
     * its death hangs the connection up. So the check comes after pidfd_open, never before: no hang-up
     * now means the process was alive then, and the pidfd is the peer's. A peer that did share its end
     * chooses which of its own processes its session follows, nothing more. */
    struct pollfd connection = { .fd = fd, .events = 0, .revents = 0 };
    int ready;
    while ((ready = poll(&connection, 1, 0)) < 0 && errno == EINTR) {
    }
    if (ready < 0 || (connection.revents & (POLLHUP | POLLERR | POLLNVAL))) {
        close(pidfd);
        errno = ESRCH;
        return -1;
    }
    return pidfd;
}

int latchkey_pidfd_exited(int pidfd) {
    struct pollfd process = { .fd = pidfd, .events = POLLIN, .revents = 0 };
    int ready;
    while ((ready = poll(&process, 1, 0)) < 0 && errno == EINTR) {
    }
    if (ready < 0) return -1;
    return (process.revents & (POLLIN | POLLHUP)) ? 1 : 0;
}

int latchkey_exit_watch_create(void) {
    return epoll_create1(EPOLL_CLOEXEC);
}

int latchkey_exit_watch_add(int watch, int pidfd, uint64_t key) {
    struct epoll_event event = { .events = EPOLLIN, .data.u64 = key };
    return epoll_ctl(watch, EPOLL_CTL_ADD, pidfd, &event);
}

int latchkey_exit_watch_remove(int watch, int pidfd) {
    return epoll_ctl(watch, EPOLL_CTL_DEL, pidfd, NULL);
}

int latchkey_exit_watch_wait(int watch, uint64_t *keys, int capacity) {
    struct epoll_event events[64];
    int wanted = capacity < 64 ? capacity : 64, count;
    if (wanted < 1) {
        errno = EINVAL;
        return -1;
    }
    do {
        count = epoll_wait(watch, events, wanted, -1);
    } while (count < 0 && errno == EINTR);
    for (int i = 0; i < count; i++) keys[i] = events[i].data.u64;
    return count;
}

long long latchkey_raise_descriptor_limit(unsigned long long wanted) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
        rlim_t raised = limit.rlim_max == RLIM_INFINITY || limit.rlim_max > wanted ? wanted : limit.rlim_max;
        if (raised > limit.rlim_cur) {
            limit.rlim_cur = raised;
            if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
        }
    }
    return limit.rlim_cur == RLIM_INFINITY ? (long long)(~0ULL >> 1) : (long long)limit.rlim_cur;
}

/* ---- Who is calling ---- */

#include <linux/sockios.h>
#include <sys/ioctl.h>

int latchkey_pidfd_open(int32_t pid) {
    if (pid <= 0) {
        errno = ESRCH;
        return -1;
    }
    return (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
}

int latchkey_socket_unread(int fd) {
    int unread = 0;
    if (ioctl(fd, SIOCINQ, &unread) != 0) return -1;
    return unread;
}

int latchkey_socket_pass_credentials(int fd) {
    int on = 1;
    return setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
}

int latchkey_socket_next_writer(int fd, int32_t *pid) {
    char byte;
    struct iovec vector = { .iov_base = &byte, .iov_len = 1 };
    /* Room for the credentials alone: a descriptor sent with the byte (SCM_RIGHTS) finds none and is
     * not installed here, even by a peek. */
    union {
        struct cmsghdr header;
        char space[CMSG_SPACE(sizeof(struct ucred))];
    } control;
    struct msghdr message = {
        .msg_iov = &vector, .msg_iovlen = 1, .msg_control = control.space, .msg_controllen = sizeof control.space
    };
    ssize_t got;
    while ((got = recvmsg(fd, &message, MSG_PEEK | MSG_DONTWAIT | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
    }
    if (got <= 0) return (int)got;
    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL; header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level == SOL_SOCKET && header->cmsg_type == SCM_CREDENTIALS &&
            header->cmsg_len == CMSG_LEN(sizeof(struct ucred))) {
            struct ucred credentials;
            memcpy(&credentials, CMSG_DATA(header), sizeof credentials);
            *pid = credentials.pid;
            return 1;
        }
    }
    errno = ENODATA;
    return -1;
}

int latchkey_secure_execution(void) {
    return getauxval(AT_SECURE) != 0;
}
