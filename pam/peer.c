/* Whether the process behind the agent socket is the real agent, before root hands it the user's
 * keys. The socket's directory and owner only say that a process of the user bound it: any of them
 * could, first, and would be handed the master key at the next login or screen unlock.
 *
 * Who serves the connection: the module sends hello (lk_agent_hello) and the kernel says who wrote
 * the answer. With SO_PASSCRED every chunk of it carries its writer's pid and uid (SCM_CREDENTIALS),
 * which no process can claim for another. SO_PEERCRED would not do: it names whoever called listen(),
 * which is systemd for a socket-activated agent, or a process that listened, forked, and then ran the
 * real agent while its copy accepts the connections.
 *
 * That process must, as root sees it through /proc:
 *   - run the agent executable the module itself would start (lk_agent_trusted, and then the same
 *     file: device and inode of /proc/PID/exe), in the module's own user namespace (in a namespace
 *     of its own, a process may point /proc/PID/exe at any file it can open: prctl PR_SET_MM_MAP);
 *   - not be traced: a tracer reads and writes the tracee at will;
 *   - have been started without variables that put code or programs of the user's choosing into it:
 *     the dynamic loader's (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT), glibc's iconv modules, OpenSSL's
 *     configuration and modules, the Swift runtime's crash handler, which runs the program
 *     SWIFT_BACKTRACE names and serves it the crashed process's memory (`kill -SEGV` is enough),
 *     and the token modules' (OPENSC_CONF names libraries OpenSC loads; OPENSC_DRIVER,
 *     PCSCLITE_CSOCK_NAME and P11_KIT_SERVER_ADDRESS let another program stand in for a card);
 *   - have nothing executable but root's files: a library the user preloaded still shows there after
 *     it erased its variable from the environment block, and so does code patched into a text page
 *     (its pages are then anonymous copies);
 *   - answer a second hello itself afterwards, still alive. The agent never executes anything else in
 *     its own process, so what was checked is what answers; and a connection it accepted itself is
 *     held by no other process.
 * Everything is read through one descriptor of /proc/PID, opened once: if the process exits and its
 * pid is reused meanwhile, the reads fail instead of describing another process.
 *
 * What this cannot see: the user's processes can trace the agent from its exec until it makes
 * itself non-dumpable, and change it and detach (data only, or the text check sees it). Only an
 * agent that no process of the user started would be beyond that. */
#include "latchkey.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
	ENVIRON_CAP = 4 << 20, /* a larger environment is not read through; the agent's is a few KiB */
	ENTRY_HEAD = 32, /* enough of an environment entry to recognise the names below */
	LINE_CAP = 8192 /* a line of /proc/PID/smaps: a path is at most PATH_MAX, escaped */
};

/* The same list as Sources/LatchkeySystem/Environment.swift (codeVariables), with which the library
 * leaves these out of an agent it starts and the agent refuses callers an application identity. */
static const struct {
	const char *entry, *why;
} code_variables[] = {
	{ "LD_PRELOAD=", "the agent was started with LD_PRELOAD" },
	{ "LD_LIBRARY_PATH=", "the agent was started with LD_LIBRARY_PATH" },
	{ "LD_AUDIT=", "the agent was started with LD_AUDIT" },
	{ "GCONV_PATH=", "the agent was started with GCONV_PATH" },
	{ "OPENSSL_CONF=", "the agent was started with OPENSSL_CONF" },
	{ "OPENSSL_MODULES=", "the agent was started with OPENSSL_MODULES" },
	{ "OPENSSL_ENGINES=", "the agent was started with OPENSSL_ENGINES" },
	{ "SWIFT_BACKTRACE=", "the agent was started with SWIFT_BACKTRACE" },
	{ "OPENSC_CONF=", "the agent was started with OPENSC_CONF" },
	{ "OPENSC_DRIVER=", "the agent was started with OPENSC_DRIVER" },
	{ "PCSCLITE_CSOCK_NAME=", "the agent was started with PCSCLITE_CSOCK_NAME" },
	{ "P11_KIT_SERVER_ADDRESS=", "the agent was started with P11_KIT_SERVER_ADDRESS" },
};

/* Why the entry `head` (its first `len` bytes) is refused, when it sets one of code_variables. */
static const char *code_variable(const char *head, size_t len)
{
	size_t i, n;

	for (i = 0; i < sizeof code_variables / sizeof code_variables[0]; i++) {
		n = strlen(code_variables[i].entry);
		if (len >= n && memcmp(head, code_variables[i].entry, n) == 0)
			return code_variables[i].why;
	}
	return NULL;
}

/* Scans the environment the process was started with (/proc/PID/environ: NUL-terminated entries)
 * for code_variables. 0 clean, 1 with `*found` (why) set, -1 unreadable or larger than ENVIRON_CAP. */
static int environment(int dir, const char **found)
{
	char buf[4096], head[ENTRY_HEAD];
	size_t len = 0, total = 0;
	ssize_t n, i;
	int fd = openat(dir, "environ", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	*found = NULL;
	while (*found == NULL && (n = read(fd, buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (total += (size_t)n) > ENVIRON_CAP)
			break;
		for (i = 0; i < n && *found == NULL; i++) {
			if (buf[i] == '\0')
				*found = code_variable(head, len), len = 0;
			else if (len < sizeof head)
				head[len++] = buf[i];
		}
	}
	if (*found == NULL && n == 0)
		*found = code_variable(head, len); /* a last entry without its NUL */
	close(fd);
	return *found != NULL ? 1 : n == 0 ? 0 : -1;
}

/* TracerPid of /proc/PID/status: 0, or -1 when traced or unreadable. It comes early in the file. */
static int untraced(int dir)
{
	char buf[4096], *line;
	ssize_t n;
	int fd = openat(dir, "status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((n = read(fd, buf, sizeof buf - 1)) < 0 && errno == EINTR)
		;
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	line = strstr(buf, "\nTracerPid:\t");
	return line != NULL && strncmp(line + 12, "0\n", 2) == 0 ? 0 : -1;
}

/* One line of /proc/PID/smaps: a mapping ("start-end perms offset dev inode [path]") or one of its
 * fields ("Anonymous:   0 kB"). `exec` says whether the current mapping is executable. */
static int smaps_line(int dir, char *line, int *exec, const char **why)
{
	char name[64], perms[8];
	unsigned long start, end, inode;
	struct stat st;
	int at = 0;

	if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %n", &start, &end, perms, &inode, &at) == 4 && at > 0) {
		*exec = strchr(perms, 'x') != NULL;
		if (!*exec)
			return 0;
		if (inode == 0) /* the kernel's own pages; any other anonymous code is refused */
			return strcmp(line + at, "[vdso]") == 0 || strcmp(line + at, "[vsyscall]") == 0
			               ? 0
			               : (*why = "the agent has executable memory that is not a file", -1);
		/* The mapped file itself (map_files, root only), not whatever its path names now. */
		snprintf(name, sizeof name, "map_files/%lx-%lx", start, end);
		if (fstatat(dir, name, &st, 0) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
		    (st.st_mode & (S_IWGRP | S_IWOTH)))
			return *why = "the agent runs code from a file that is not root's (a preloaded library?)", -1;
		return 0;
	}
	if (*exec && strncmp(line, "Anonymous:", 10) == 0 && strtoul(line + 10, NULL, 10) != 0)
		return *why = "code in the agent was changed (anonymous pages in an executable mapping)", -1;
	return 0;
}

/* Every executable mapping of the process (smaps_line). 0, or -1 with `why`. */
static int code_is_roots(int dir, const char **why)
{
	char *buf = malloc(LINE_CAP + 1), *nl;
	size_t have = 0;
	ssize_t n = -1;
	int fd = openat(dir, "smaps", O_RDONLY | O_CLOEXEC), exec = 0, rc = 0;

	*why = "cannot read the agent's memory map";
	if (fd < 0 || buf == NULL) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (rc == 0 && (n = read(fd, buf + have, LINE_CAP - have)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		have += (size_t)n;
		buf[have] = '\0';
		while (rc == 0 && (nl = strchr(buf, '\n')) != NULL) {
			*nl = '\0';
			rc = smaps_line(dir, buf, &exec, why);
			have -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, have + 1);
		}
		if (have == LINE_CAP) /* a line longer than any the kernel writes */
			break;
	}
	free(buf);
	close(fd);
	return rc != 0 ? -1 : n == 0 && have == 0 ? 0 : -1;
}

/* The checks on the process behind `dir`, which runs the file `want` should be. 0, or -1 with `why`. */
static int examine(int dir, const struct stat *want, const char **why)
{
	struct stat got, mine;
	const char *var = NULL;
	int r;

	if (fstatat(dir, "exe", &got, 0) != 0)
		return *why = "cannot examine the executable of the process serving the socket", -1;
	if (got.st_dev != want->st_dev || got.st_ino != want->st_ino)
		return *why = "the socket is served by a process that does not run the agent executable", -1;
	if (stat("/proc/self/ns/user", &mine) != 0 || fstatat(dir, "ns/user", &got, 0) != 0 ||
	    got.st_dev != mine.st_dev || got.st_ino != mine.st_ino)
		return *why = "the agent runs in another user namespace", -1;
	if (untraced(dir) != 0)
		return *why = "the agent is being traced (or its status cannot be read)", -1;
	if ((r = environment(dir, &var)) != 0)
		return *why = r > 0 ? var : "cannot read the environment the agent was started with", -1;
	return code_is_roots(dir, why);
}

int lk_agent_genuine(int fd, const char *agent, uid_t uid, pid_t *pid, const char **why)
{
	char exe[4096], path[32];
	struct stat want, now;
	pid_t again;
	int dir, rc;

	*pid = 0;
	if (lk_agent_trusted(agent, exe, sizeof exe, why) != 0)
		return -1;
	if (stat(exe, &want) != 0)
		return *why = "cannot examine the agent executable", -1;
	if (lk_agent_hello(fd, uid, pid) != 0)
		return *why = "no answer to hello from one process of the user", -1;
	snprintf(path, sizeof path, "/proc/%ld", (long)*pid);
	if ((dir = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return *why = "the process that answered is gone", -1;
	rc = examine(dir, &want, why);
	again = *pid;
	if (rc == 0 && lk_agent_hello(fd, uid, &again) != 0)
		rc = -1, *why = "another process answered the second hello";
	/* Still there (so still the pid that answered), still the agent executable. */
	if (rc == 0 && (fstatat(dir, "exe", &now, 0) != 0 || now.st_dev != want.st_dev || now.st_ino != want.st_ino))
		rc = -1, *why = "the agent exited or changed during the check";
	close(dir);
	return rc;
}
