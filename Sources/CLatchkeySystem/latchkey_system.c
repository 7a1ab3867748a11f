#define _GNU_SOURCE
#include "latchkey_system.h"

#include <stddef.h>
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
