/* File access for pam_latchkey: the user's keybag and marker (run as the user, usually in a forked
 * child, so everything reachable from lk_read_user_file, lk_write_atomic and lk_mkdirs uses only
 * async-signal-safe calls: no malloc, no stdio), and the machine secret (run as root). */
#include "latchkey.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h> /* rename */
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PATH_CAP = 4096 };

/* dst = a || b || c, or ENAMETOOLONG. */
static int join3(char *dst, size_t cap, const char *a, const char *b, const char *c)
{
	size_t la = strlen(a), lb = strlen(b), lc = strlen(c);

	if (la + lb + lc + 1 > cap)
		return ENAMETOOLONG;
	memcpy(dst, a, la);
	memcpy(dst + la, b, lb);
	memcpy(dst + la + lb, c, lc + 1);
	return 0;
}

/* The directory part of `path` ("/" for "/x", "." for "x"). */
static int parent_dir(char *dst, size_t cap, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash == NULL ? 0 : slash == path ? 1 : (size_t)(slash - path);

	if (n + 1 > cap)
		return ENAMETOOLONG;
	if (n == 0)
		return join3(dst, cap, ".", "", "");
	memcpy(dst, path, n);
	dst[n] = '\0';
	return 0;
}

static int fsync_dir_of(const char *path)
{
	char dir[PATH_CAP];
	int fd, rc = parent_dir(dir, sizeof dir, path);

	if (rc != 0)
		return rc;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno;
	rc = fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
	close(fd);
	return rc;
}

static int read_all(int fd, uint8_t *buf, size_t cap, size_t *len)
{
	ssize_t n;

	*len = 0;
	for (;;) {
		n = read(fd, buf + *len, cap - *len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		if (n == 0)
			return 0;
		*len += (size_t)n;
		if (*len == cap) {
			uint8_t extra;
			while ((n = read(fd, &extra, 1)) < 0 && errno == EINTR)
				;
			return n == 0 ? 0 : n < 0 ? errno : EFBIG;
		}
	}
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Reads a file that must be a regular file owned by `owner` and writable by nobody else, without
 * following a symlink (O_NOFOLLOW) or blocking on a FIFO (O_NONBLOCK, checked with fstat). */
int lk_read_user_file(const char *path, uid_t owner, uint8_t *buf, size_t cap, size_t *len)
{
	struct stat st;
	int rc, fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

	*len = 0;
	if (fd < 0)
		return errno;
	if (fstat(fd, &st) != 0)
		rc = errno;
	else if (!S_ISREG(st.st_mode))
		rc = EINVAL;
	else if (st.st_uid != owner)
		rc = EPERM;
	else if (st.st_mode & (S_IWGRP | S_IWOTH))
		rc = EACCES;
	else
		rc = read_all(fd, buf, cap, len);
	close(fd);
	return rc;
}

/* docs/KEYBAG.md "Writing atomically": path.tmp-<suffix> with O_EXCL|O_NOFOLLOW, mode 0600, write,
 * fsync, then rename over `path` (replace) or link it to `path` (create: never replaces a file that
 * appeared meanwhile, EEXIST), then fsync the directory. Before publication any failure removes the
 * temporary file and leaves `path` as it was; a failing directory fsync after it is reported as
 * LK_DIR_NOT_SYNCED (the new file is in place and stays). */
int lk_write_atomic(const char *path, const char *tmp_suffix, const uint8_t *buf, size_t len, int replace)
{
	char tmp[PATH_CAP];
	struct stat st;
	int fd, rc = join3(tmp, sizeof tmp, path, ".tmp-", tmp_suffix);

	if (rc != 0)
		return rc;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	rc = fchmod(fd, 0600) == 0 ? 0 : errno;
	if (rc == 0)
		rc = write_all(fd, buf, len);
	if (rc == 0 && fsync(fd) != 0)
		rc = errno;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	if (rc == 0 && replace && rename(tmp, path) != 0)
		rc = errno;
	if (rc == 0 && !replace && link(tmp, path) != 0) {
		rc = errno;
		/* A filesystem without hard links: fall back to check-then-rename. */
		if (rc != EEXIST && lstat(path, &st) != 0 && errno == ENOENT)
			rc = rename(tmp, path) == 0 ? 0 : errno;
	}
	if (rc != 0 || !replace)
		unlink(tmp); /* after rename it no longer exists; after link it is a second name */
	if (rc == 0 && fsync_dir_of(path) != 0)
		rc = LK_DIR_NOT_SYNCED;
	return rc;
}

/* mkdir -p with `mode` for each directory created; the result must be a directory, not a symlink. */
int lk_mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_CAP];
	struct stat st;
	size_t i, n = strlen(path);

	if (n == 0 || n >= sizeof buf)
		return ENAMETOOLONG;
	memcpy(buf, path, n + 1);
	for (i = 1; i <= n; i++) {
		if (buf[i] != '/' && buf[i] != '\0')
			continue;
		buf[i] = '\0';
		if (mkdir(buf, mode) != 0 && errno != EEXIST)
			return errno;
		buf[i] = path[i];
	}
	if (lstat(path, &st) != 0)
		return errno;
	return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

/* 16 lowercase hex digits from the random generator (not async-signal-safe: call it before fork). */
void lk_tmp_suffix(char out[17])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t r[8] = { 0 };
	int i;

	if (lk_random(r, sizeof r) != 0) /* the file is still created with O_EXCL; a clash only fails */
		memset(r, 0x5a, sizeof r);
	for (i = 0; i < 8; i++) {
		out[2 * i] = hex[r[i] >> 4];
		out[2 * i + 1] = hex[r[i] & 15];
	}
	out[16] = '\0';
}

/* The machine secret: 32 bytes in a regular root-owned 0600 file, in a root-owned directory nobody
 * else can write. Created when missing; written to a temporary file, fsynced and then linked into
 * place, so a crash or a concurrent login never leaves (or reads) a partial secret. */
int lk_machine_secret(const char *path, uint8_t out[LK_KEY_LEN])
{
	char dir[PATH_CAP], suffix[17];
	uint8_t fresh[LK_KEY_LEN];
	struct stat st;
	size_t len = 0;
	int fd, rc = parent_dir(dir, sizeof dir, path);

	if (rc != 0)
		return rc;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return errno;
	if (lstat(dir, &st) != 0)
		return errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return EPERM;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && errno == ENOENT) {
		lk_tmp_suffix(suffix);
		if (lk_random(fresh, sizeof fresh) != 0)
			return EIO;
		rc = lk_write_atomic(path, suffix, fresh, sizeof fresh, 0);
		lk_wipe(fresh, sizeof fresh);
		if (rc != 0 && rc != EEXIST && rc != LK_DIR_NOT_SYNCED)
			return rc;
		fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	}
	if (fd < 0)
		return errno;
	if (fstat(fd, &st) != 0)
		rc = errno;
	else if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 07777) != 0600 || st.st_size != LK_KEY_LEN)
		rc = EPERM;
	else if ((rc = read_all(fd, out, LK_KEY_LEN, &len)) == 0 && len != LK_KEY_LEN)
		rc = EIO;
	close(fd);
	if (rc != 0)
		lk_wipe(out, LK_KEY_LEN);
	return rc;
}
