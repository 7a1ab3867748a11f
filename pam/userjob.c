/* pam_latchkey: file work done as the user (read, compare-and-swap, create, marker, unlink), in a
 * child that drops privileges when the module runs as root. */
#include "module.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_full(int fd, const uint8_t *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, buf, len)) < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n, len -= (size_t)n;
	}
	return 0;
}

/* The empty keychain.db of a new keychain, made before its keybag: the agent refuses a keybag without
 * its database as a lost database, and initialises an empty one. An empty database that is already
 * there (a creation interrupted before its keybag) holds nothing and is used; any other database
 * without a keybag is left to a human (ENOTEMPTY). *made says whether this call created the file. */
static int empty_database(const char *path, uid_t uid, int *made)
{
	char wal[PATH_CAP + sizeof "-wal"];
	size_t n = strlen(path);
	struct stat st;
	int fd;

	*made = 0;
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		(void)fchmod(fd, 0600); /* the umask can only narrow 0600; state it exactly, as the agent does */
		close(fd);
		*made = 1;
		return 0;
	}
	if (errno != EEXIST)
		return errno;
	if (n >= PATH_CAP)
		return ENAMETOOLONG;
	memcpy(wal, path, n);
	memcpy(wal + n, "-wal", sizeof "-wal");
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != 0 || st.st_uid != uid)
		return ENOTEMPTY;
	/* A log beside an empty main file can hold the whole database (nothing checkpointed yet). */
	if (lstat(wal, &st) == 0 ? st.st_size != 0 : errno != ENOENT)
		return ENOTEMPTY;
	return 0;
}

/* Runs as the user. Only async-signal-safe calls (the child of a possibly threaded process). */
static int job_run(const struct lk_user *u, struct job *j)
{
	uint8_t current[LK_KEYBAG_SIZE + 1];
	struct stat st;
	size_t n = 0;
	int rc, made;

	switch (j->kind) {
	case JOB_READ:
		return lk_read_user_file(j->path, u->uid, j->out, sizeof j->out, &j->out_len);
	case JOB_REPLACE:
		/* Compare and swap: only if the file still holds what we read (no other writer won). */
		rc = lk_read_user_file(j->path, u->uid, current, sizeof current, &n);
		if (rc == 0 && (n != j->expect_len || memcmp(current, j->expect, n) != 0))
			rc = ESTALE;
		lk_wipe(current, sizeof current);
		return rc != 0 ? rc : lk_write_atomic(j->path, j->suffix, j->data, j->len, 1);
	case JOB_CREATE:
		if ((rc = lk_mkdirs(j->dir, 0700)) != 0 || (rc = empty_database(j->database, u->uid, &made)) != 0)
			return rc;
		rc = lk_write_atomic(j->path, j->suffix, j->data, j->len, 0);
		/* Not after EEXIST: the keybag that appeared meanwhile is another creator's, and so is the database. */
		if (rc != 0 && rc != LK_DIR_NOT_SYNCED && rc != EEXIST && made)
			unlink(j->database);
		return rc;
	case JOB_MARKER:
		if (lstat(j->dir, &st) != 0)
			return errno;
		return S_ISDIR(st.st_mode) ? lk_write_atomic(j->path, j->suffix, j->data, j->len, 1) : ENOTDIR;
	case JOB_UNLINK:
		return unlink(j->path) == 0 || errno == ENOENT ? 0 : errno;
	}
	return EINVAL;
}

/* Runs `j` as the user: in a child that drops privileges when we are root (child.c: no SIGCHLD, a
 * clean slate, killed after FILE_TIMEOUT_MS), in-process when we already are the user (a screen
 * locker), never as anybody else. Returns 0 or an errno value (DROP_FAILED when the user's identity
 * could not be taken, ETIMEDOUT when the child was killed); j->out receives the child's output. */
int as_user(struct ctx *c, struct job *j)
{
	int64_t deadline;
	int p[2], status = 0, rc, reaped, fork_errno;
	size_t len = 0;
	pid_t pid;

	j->out_len = 0;
	if (geteuid() != 0) {
		rc = getuid() == c->user.uid && geteuid() == c->user.uid ? job_run(&c->user, j) : DROP_FAILED;
		return rc == LK_DIR_NOT_SYNCED ? 0 : rc;
	}
	if (pipe2(p, O_CLOEXEC) != 0)
		return errno;
	deadline = lk_now_ms() + FILE_TIMEOUT_MS;
	pid = lk_fork_quiet();
	fork_errno = errno;
	if (pid == 0) {
		close(p[0]);
		lk_child_reset(p[1]);
		rc = lk_drop_privileges(&c->user) == 0 ? job_run(&c->user, j) : DROP_FAILED;
		if (rc == 0 && j->out_len > 0 && write_full(p[1], j->out, j->out_len) != 0)
			rc = EIO;
		lk_wipe(j->out, sizeof j->out);
		_exit(rc & 0xff);
	}
	close(p[1]);
	if (pid < 0) {
		rc = fork_errno;
	} else {
		rc = lk_read_until(p[0], j->out, sizeof j->out, &len, deadline);
		reaped = lk_reap(pid, rc == 0 ? deadline : 0, &status);
		if (reaped != 0) {
			LOG(c, LOG_WARNING, "%s: the child acting as %s did not finish within %d s: %s", j->path,
			    c->user.name, FILE_TIMEOUT_MS / 1000,
			    reaped == ETIMEDOUT ? "killed" : "killed, but not collected (left as a zombie)");
			rc = ETIMEDOUT;
		} else if (rc == 0) {
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;
		}
	}
	close(p[0]);
	if (rc == LK_DIR_NOT_SYNCED) {
		LOG(c, LOG_WARNING, "%s written, but its directory could not be synced", j->path);
		rc = 0;
	}
	if (rc == 0)
		j->out_len = len;
	else
		lk_wipe(j->out, sizeof j->out);
	return rc;
}

const char *job_errtext(int rc)
{
	return rc == DROP_FAILED ? "cannot act as the user"
	       : rc == ESTALE    ? "the file changed meanwhile"
	       : rc == ETIMEDOUT ? "no answer from the file system in time"
	       : rc == ENOTEMPTY ? "keychain.db exists without a keybag"
	                         : strerror(rc);
}
