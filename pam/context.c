/* pam_latchkey: module options, the user, and the per-call context built from them. */
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

/* ---- options and the user ---- */

static int parse_u32(const char *s, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || *s == '-' || v > UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static void parse_options(pam_handle_t *pamh, int argc, const char **argv, struct options *o)
{
	const char *a;
	int i;

	memset(o, 0, sizeof *o);
	o->t = DEFAULT_T, o->m = DEFAULT_M, o->p = DEFAULT_P;
	o->keychain = DEFAULT_KEYCHAIN, o->agent = LATCHKEYD, o->machine_secret = DEFAULT_MACHINE_SECRET;
	for (i = 0; i < argc; i++) {
		a = argv[i];
		if (strcmp(a, "debug") == 0)
			o->debug = 1;
		else if (strcmp(a, "auto_create") == 0)
			o->auto_create = 1;
		else if (strcmp(a, "allow_weak_argon2") == 0)
			o->allow_weak = 1;
		else if (strncmp(a, "keychain=", 9) == 0)
			o->keychain = a + 9;
		else if (strncmp(a, "agent=", 6) == 0 && a[6] == '/')
			o->agent = a + 6;
		else if (strncmp(a, "runtime_dir=", 12) == 0 && a[12] == '/')
			o->runtime_dir = a + 12;
		else if (strncmp(a, "machine_secret=", 15) == 0 && a[15] == '/')
			o->machine_secret = a + 15;
		else if (strncmp(a, "only_services=", 14) == 0)
			o->only_services = a + 14;
		else if (!(strncmp(a, "argon2_t=", 9) == 0 && parse_u32(a + 9, &o->t) == 0) &&
		         !(strncmp(a, "argon2_m=", 9) == 0 && parse_u32(a + 9, &o->m) == 0) &&
		         !(strncmp(a, "argon2_p=", 9) == 0 && parse_u32(a + 9, &o->p) == 0))
			pam_syslog(pamh, LOG_AUTHPRIV | LOG_WARNING, "unknown or invalid option '%s' ignored", a);
	}
	if (!lk_params_ok(o->t, o->m, o->p, 1, o->allow_weak) || !lk_params_pam_ok(o->t, o->m, o->p)) {
		pam_syslog(pamh, LOG_AUTHPRIV | LOG_WARNING,
		           "Argon2 parameters t=%u m=%u p=%u refused (below 65536 KiB needs allow_weak_argon2; "
		           "at most t=%d m=%d p=%d); using t=%d m=%d p=%d",
		           o->t, o->m, o->p, LK_PAM_MAX_T, LK_PAM_MAX_M_KIB, LK_PAM_MAX_P, DEFAULT_T, DEFAULT_M,
		           DEFAULT_P);
		o->t = DEFAULT_T, o->m = DEFAULT_M, o->p = DEFAULT_P;
	}
}

/* Expands %h (home), %u (user name) and %% in the keychain template; the result must be absolute. */
static int expand(const char *tmpl, const struct lk_user *u, char *out, size_t cap)
{
	size_t o = 0, n;
	const char *ins;
	char one[2] = { 0, 0 };

	for (; *tmpl != '\0'; tmpl++) {
		ins = one;
		one[0] = *tmpl;
		if (tmpl[0] == '%' && (tmpl[1] == 'h' || tmpl[1] == 'u' || tmpl[1] == '%')) {
			ins = tmpl[1] == 'h' ? u->home : tmpl[1] == 'u' ? u->name : "%";
			tmpl++;
		}
		n = strlen(ins);
		if (o + n >= cap)
			return -1;
		memcpy(out + o, ins, n);
		o += n;
	}
	out[o] = '\0';
	return out[0] == '/' ? 0 : -1;
}

/* Whether `service` is one of the comma-separated names in `list`. */
static int listed(const char *list, const char *service)
{
	size_t n = strlen(service), len;
	const char *comma;

	for (;;) {
		comma = strchr(list, ',');
		len = comma != NULL ? (size_t)(comma - list) : strlen(list);
		if (len == n && n > 0 && strncmp(list, service, n) == 0)
			return 1;
		if (comma == NULL)
			return 0;
		list = comma + 1;
	}
}

static int path_join(char *out, const char *dir, const char *name)
{
	int n = snprintf(out, PATH_CAP, "%s/%s", dir, name);
	return n > 0 && n < PATH_CAP ? 0 : -1;
}

/* Whether logind made the user's runtime directory /run/user/UID (lstat: a directory, not a symlink,
 * owned by `uid`, mode exactly 0700), written to `out`: then the agent lives in out/latchkey, as
 * AgentEndpoint.current(runtimeDirectory:uid:userRuntimeRoot:) decides for a client without
 * XDG_RUNTIME_DIR (su -, sudo -u, cron). The agent and lk_agent_connect check the socket directory
 * itself again. */
static int user_runtime(uid_t uid, char out[PATH_CAP])
{
	struct stat st;
	int n = snprintf(out, PATH_CAP, "/run/user/%lu", (unsigned long)uid);

	return n > 0 && n < PATH_CAP && lstat(out, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid &&
	       (st.st_mode & 07777) == 0700;
}

void ctx_free(struct ctx *c)
{
	if (c != NULL) {
		free(c->user.groups);
		free(c->pwbuf);
		free(c);
	}
}

/* The user (PAM_USER, never prompted for), their groups, and every path the module uses. */
struct ctx *ctx_new(pam_handle_t *pamh, int argc, const char **argv)
{
	struct ctx *c = calloc(1, sizeof *c);
	struct passwd pw, *res = NULL;
	const void *item = NULL;
	const char *base;
	size_t size = 16384;
	int rc, n = 32;

	if (c == NULL)
		return NULL;
	c->pamh = pamh;
	parse_options(pamh, argc, argv, &c->opt);
	if (c->opt.only_services != NULL && (pam_get_item(pamh, PAM_SERVICE, &item) != PAM_SUCCESS || item == NULL ||
	                                     !listed(c->opt.only_services, item))) {
		DEBUG(c, "service '%s' is not in only_services: nothing to do", item != NULL ? (const char *)item : "");
		goto fail;
	}
	item = NULL;
	if (pam_get_item(pamh, PAM_USER, &item) != PAM_SUCCESS || item == NULL || *(const char *)item == '\0') {
		DEBUG(c, "no user name");
		goto fail;
	}
	for (;;) {
		if ((c->pwbuf = malloc(size)) == NULL)
			goto fail;
		rc = getpwnam_r(item, &pw, c->pwbuf, size, &res);
		if (rc != ERANGE || size >= (1 << 20))
			break;
		free(c->pwbuf);
		size *= 2;
	}
	if (rc != 0 || res == NULL || pw.pw_dir == NULL || pw.pw_dir[0] != '/') {
		LOG(c, LOG_ERR, "cannot look up user '%s' or their home directory", (const char *)item);
		goto fail;
	}
	c->user.name = pw.pw_name, c->user.uid = pw.pw_uid, c->user.gid = pw.pw_gid, c->user.home = pw.pw_dir;
	for (;;) {
		int want = n;
		gid_t *g = realloc(c->user.groups, sizeof *g * (size_t)n);
		if (g == NULL)
			goto fail;
		c->user.groups = g;
		if (getgrouplist(c->user.name, c->user.gid, g, &n) >= 0)
			break;
		if (want >= 65536)
			goto fail;
		n = n > want ? n : want * 2;
	}
	c->user.ngroups = n;
	if (expand(c->opt.keychain, &c->user, c->keychain, PATH_CAP) != 0 ||
	    path_join(c->keybag, c->keychain, "keybag") != 0 ||
	    path_join(c->marker, c->keychain, "password-out-of-step") != 0 ||
	    path_join(c->database, c->keychain, "keychain.db") != 0) {
		LOG(c, LOG_ERR, "keychain path '%s' is not absolute or too long", c->opt.keychain);
		goto fail;
	}
	/* The agent's socket directory, exactly as the Swift client finds it (AgentEndpoint.swift).
	 * The process environment is the user's only when we run as the user (a screen locker). */
	base = c->opt.runtime_dir;
	if (base == NULL)
		base = pam_getenv(pamh, "XDG_RUNTIME_DIR");
	if ((base == NULL || base[0] != '/') && getuid() == c->user.uid && geteuid() == c->user.uid)
		base = getenv("XDG_RUNTIME_DIR");
	c->has_runtime = base != NULL && base[0] == '/';
	if (c->has_runtime) {
		snprintf(c->runtime, PATH_CAP, "%s", base);
		rc = snprintf(c->sockdir, PATH_CAP, "%s/latchkey", base);
	} else if (user_runtime(c->user.uid, c->runtime)) {
		/* has_runtime stays 0: the agent we may start, without XDG_RUNTIME_DIR, picks this same
		 * directory by the same rule. */
		rc = snprintf(c->sockdir, PATH_CAP, "%s/latchkey", c->runtime);
		c->runtime[0] = '\0';
	} else {
		rc = snprintf(c->sockdir, PATH_CAP, "/tmp/latchkey-%lu", (unsigned long)c->user.uid);
	}
	if (rc < 0 || rc >= PATH_CAP) {
		LOG(c, LOG_ERR, "runtime directory path too long");
		goto fail;
	}
	return c;
fail:
	ctx_free(c);
	return NULL;
}
