/* The C keybag against the shared vectors (Tests/LatchkeyKeybagTests/Vectors/keybag-v1.json, the
 * same file the Swift tests read), plus parsing, corruption, wrong passwords, password change,
 * creation, and the file helpers (atomic write, safe read, machine secret).
 * Usage: test_keybag PATH/TO/keybag-v1.json */
#include "latchkey.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "check.h"

/* ---- a purpose-built reader for the flat vector objects: "key" : "hex" | number ---- */

struct obj {
	const char *start, *end;
};

static const char *value_of(struct obj o, const char *key)
{
	size_t n = strlen(key);
	const char *p;

	for (p = o.start; p + n + 2 < o.end; p++) {
		if (p[0] != '"' || strncmp(p + 1, key, n) != 0 || p[n + 1] != '"')
			continue;
		for (p += n + 2; p < o.end && (*p == ' ' || *p == ':' || *p == '\n' || *p == '\t'); p++)
			;
		return p;
	}
	return NULL;
}

static int hexval(int ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Decodes the hex string under `key`; returns its byte length, or -1 if absent or malformed. */
static long get_hex(struct obj o, const char *key, uint8_t *out, size_t cap)
{
	const char *p = value_of(o, key);
	size_t n = 0;

	if (p == NULL || *p++ != '"')
		return -1;
	for (; *p != '"'; p += 2) {
		if (hexval(p[0]) < 0 || hexval(p[1]) < 0 || n >= cap)
			return -1;
		out[n++] = (uint8_t)(hexval(p[0]) << 4 | hexval(p[1]));
	}
	return (long)n;
}

static int get_num(struct obj o, const char *key, long *v)
{
	const char *p = value_of(o, key);
	char *end;

	if (p == NULL)
		return -1;
	*v = strtol(p, &end, 10);
	return end == p ? -1 : 0;
}

static int get_fixed(struct obj o, const char *key, uint8_t *out, size_t len)
{
	return get_hex(o, key, out, len) == (long)len ? 0 : -1;
}

/* The objects of the "vectors" array (each flat: no nested braces). */
static int split_vectors(const char *json, struct obj *out, int cap)
{
	const char *p = strstr(json, "\"vectors\"");
	int n = 0, in_string = 0;

	if (p == NULL || (p = strchr(p, '[')) == NULL)
		return 0;
	for (p++; *p != '\0' && *p != ']' && n < cap; p++) {
		if (*p != '{')
			continue;
		out[n].start = p;
		for (; *p != '\0' && (in_string || *p != '}'); p++) {
			if (*p == '\\' && in_string && p[1] != '\0')
				p++;
			else if (*p == '"')
				in_string = !in_string;
		}
		out[n++].end = p;
	}
	return n;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long size;

	if (f == NULL)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = calloc(1, (size_t)size + 1)) != NULL && fread(buf, 1, (size_t)size, f) != (size_t)size) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static void refresh_checksum(uint8_t file[LK_KEYBAG_SIZE])
{
	unsigned int n = 0;
	EVP_Digest(file, 548, file + 548, &n, EVP_sha256(), NULL);
}

/* ---- one vector: every intermediate value, the file, and reading it back ---- */

struct vector {
	char name[32];
	uint8_t pw[256], salt[16], id[16], seed[32], ck[7][32], nonce[7][12], master[32], verifier[32];
	uint8_t kek[7][32], wrapped[7][60], file[LK_KEYBAG_SIZE], df[32];
	long pwlen, t, m, p, flags;
	int has_df;
};

static int load_vector(struct obj o, struct vector *v)
{
	char key[32];
	const char *name = value_of(o, "name");
	long uid;
	uint8_t ms[32];
	int c, bad = 0;

	memset(v, 0, sizeof *v);
	if (name != NULL && *name == '"')
		sscanf(name + 1, "%31[^\"]", v->name);
	v->pwlen = get_hex(o, "password_hex", v->pw, sizeof v->pw);
	bad |= v->pwlen < 0 || get_num(o, "time_cost", &v->t) || get_num(o, "memory_kib", &v->m) ||
	       get_num(o, "parallelism", &v->p);
	if (get_num(o, "flags", &v->flags) != 0)
		v->flags = 0; /* vectors written before the device factor existed */
	bad |= get_fixed(o, "salt_hex", v->salt, 16) | get_fixed(o, "id_hex", v->id, 16) |
	       get_fixed(o, "always_seed_hex", v->seed, 32) | get_fixed(o, "master_key_hex", v->master, 32) |
	       get_fixed(o, "verifier_hex", v->verifier, 32) | get_fixed(o, "keybag_hex", v->file, LK_KEYBAG_SIZE);
	for (c = 1; c <= 7; c++) {
		snprintf(key, sizeof key, "class_key_%d_hex", c);
		bad |= get_fixed(o, key, v->ck[c - 1], 32);
		snprintf(key, sizeof key, "nonce_%d_hex", c);
		bad |= get_fixed(o, key, v->nonce[c - 1], 12);
		snprintf(key, sizeof key, "kek_%d_hex", c);
		bad |= get_fixed(o, key, v->kek[c - 1], 32);
		snprintf(key, sizeof key, "wrapped_%d_hex", c);
		bad |= get_fixed(o, key, v->wrapped[c - 1], 60);
	}
	if (v->flags & LK_FLAG_DEVICE_BOUND) {
		v->has_df = get_fixed(o, "device_factor_hex", v->df, 32) == 0;
		CHECK(v->has_df, "%s: device-bound vector without device_factor_hex", v->name);
		/* DF = HMAC-SHA256(MS, "latchkey device factor v1" || uid || id), when the inputs are given. */
		if (get_fixed(o, "machine_secret_hex", ms, 32) == 0 && get_num(o, "uid", &uid) == 0) {
			uint8_t df[32];
			CHECK(lk_device_factor(ms, (uint32_t)uid, v->id, df) == 0 && memcmp(df, v->df, 32) == 0,
			      "%s: device factor", v->name);
		}
	}
	return bad ? -1 : 0;
}

static void test_vector(struct vector *v)
{
	uint8_t m[32], vf[32], kek[32], ck[32], file[LK_KEYBAG_SIZE], wrong[32];
	const uint8_t *df = v->has_df ? v->df : NULL;
	struct lk_keybag kb, parsed;
	const char *reason;
	int c;

	CHECK(lk_master_key(v->pw, (size_t)v->pwlen, v->salt, (uint32_t)v->t, (uint32_t)v->m, (uint32_t)v->p, m) == 0 &&
	              memcmp(m, v->master, 32) == 0,
	      "%s: master key", v->name);
	CHECK(lk_verifier(m, vf) == 0 && memcmp(vf, v->verifier, 32) == 0, "%s: verifier", v->name);

	memset(&kb, 0, sizeof kb);
	kb.flags = (uint16_t)v->flags;
	memcpy(kb.id, v->id, 16);
	kb.t = (uint32_t)v->t, kb.m = (uint32_t)v->m, kb.p = (uint32_t)v->p;
	memcpy(kb.salt, v->salt, 16);
	memcpy(kb.seed, v->seed, 32);
	for (c = 1; c <= 7; c++)
		CHECK(lk_class_kek(&kb, c, m, df, kek) == LK_OK && memcmp(kek, v->kek[c - 1], 32) == 0, "%s: KEK_%d",
		      v->name, c);
	CHECK(lk_build(&kb, m, df, (const uint8_t(*)[32])v->ck, (const uint8_t(*)[12])v->nonce) == LK_OK, "%s: build",
	      v->name);
	for (c = 1; c <= 7; c++)
		CHECK(memcmp(kb.wrapped[c - 1], v->wrapped[c - 1], 60) == 0, "%s: wrapped_%d", v->name, c);
	lk_serialize(&kb, file);
	CHECK(memcmp(file, v->file, LK_KEYBAG_SIZE) == 0, "%s: whole keybag file", v->name);

	/* Reading the expected file back: parse, re-serialize, verify, unwrap every class. */
	CHECK(lk_parse(v->file, LK_KEYBAG_SIZE, &parsed, &reason) == LK_OK, "%s: parse (%s)", v->name, reason);
	lk_serialize(&parsed, file);
	CHECK(memcmp(file, v->file, LK_KEYBAG_SIZE) == 0, "%s: parse then serialize is identity", v->name);
	CHECK(parsed.flags == v->flags && parsed.t == v->t && parsed.m == v->m && parsed.p == v->p, "%s: parsed header",
	      v->name);
	CHECK(lk_check_master(&parsed, m) == LK_OK, "%s: verifier accepts M", v->name);
	for (c = 1; c <= 7; c++)
		CHECK(lk_class_kek(&parsed, c, m, df, kek) == LK_OK &&
		              lk_unwrap(kek, parsed.id, c, parsed.wrapped[c - 1], ck) == 0 &&
		              memcmp(ck, v->ck[c - 1], 32) == 0,
		      "%s: unwrap class %d", v->name, c);
	/* The AAD binds the class: an entry does not open in another slot. */
	CHECK(lk_class_kek(&parsed, 1, m, df, kek) == LK_OK && lk_unwrap(kek, parsed.id, 2, parsed.wrapped[0], ck) != 0,
	      "%s: class 1 entry opens as class 2", v->name);

	if (v->flags & LK_FLAG_DEVICE_BOUND) {
		CHECK(lk_class_kek(&parsed, 4, m, NULL, kek) == LK_NO_DEVICE_FACTOR, "%s: class 4 without DF", v->name);
		CHECK(lk_class_kek(&parsed, 6, NULL, NULL, kek) == LK_NO_DEVICE_FACTOR, "%s: class 6 without DF",
		      v->name);
		CHECK(lk_class_kek(&parsed, 1, m, NULL, kek) == LK_OK, "%s: class 1 needs no DF", v->name);
		memcpy(wrong, v->df, 32);
		wrong[0] ^= 1;
		CHECK(lk_class_kek(&parsed, 5, m, wrong, kek) == LK_OK &&
		              lk_unwrap(kek, parsed.id, 5, parsed.wrapped[4], ck) != 0,
		      "%s: class 5 opens with a wrong DF", v->name);
	}

	/* A wrong password is reported by the verifier, before any unwrap. */
	CHECK(lk_master_key("wrong", 5, v->salt, (uint32_t)v->t, (uint32_t)v->m, (uint32_t)v->p, wrong) == 0 &&
	              lk_check_master(&parsed, wrong) == LK_WRONG_PASSWORD,
	      "%s: wrong password detected", v->name);
}

/* ---- parsing: every rule of docs/KEYBAG.md "Reading" ---- */

static void expect_parse(const uint8_t *buf, size_t len, enum lk_result want, const char *what)
{
	struct lk_keybag kb;
	const char *reason = "";
	enum lk_result got = lk_parse(buf, len, &kb, &reason);

	CHECK(got == want, "%s: got %s (%s), want %s", what, lk_result_text(got), reason, lk_result_text(want));
}

static void test_parsing(const uint8_t good[LK_KEYBAG_SIZE])
{
	uint8_t f[LK_KEYBAG_SIZE + 1];
	struct lk_keybag kb;
	const char *reason;
	size_t i;
	int bit, all_corrupt = 1;

	expect_parse(good, 0, LK_CORRUPT, "empty file");
	expect_parse(good, 5, LK_CORRUPT, "prefix of the magic");
	expect_parse((const uint8_t *)"hello", 5, LK_NOT_KEYBAG, "short foreign file");
	expect_parse((const uint8_t *)"#!/bin/sh\necho", 14, LK_NOT_KEYBAG, "foreign file");
	expect_parse(good, 40, LK_CORRUPT, "truncated below 44 bytes");
	expect_parse(good, 579, LK_CORRUPT, "one byte short");
	memcpy(f, good, LK_KEYBAG_SIZE);
	f[LK_KEYBAG_SIZE] = 0;
	expect_parse(f, LK_KEYBAG_SIZE + 1, LK_CORRUPT, "one byte appended");

	/* Every single-bit flip: the magic makes "not a keybag", anything else is caught as corrupt. */
	for (i = 0; i < LK_KEYBAG_SIZE; i++) {
		for (bit = 0; bit < 8; bit += 3) {
			memcpy(f, good, LK_KEYBAG_SIZE);
			f[i] ^= (uint8_t)(1 << bit);
			reason = "";
			if (lk_parse(f, LK_KEYBAG_SIZE, &kb, &reason) != (i < 8 ? LK_NOT_KEYBAG : LK_CORRUPT) ||
			    (i >= 8 && strcmp(reason, "checksum mismatch") != 0)) {
				all_corrupt = 0;
				printf("  flip at byte %zu bit %d: %s\n", i, bit, reason);
			}
		}
	}
	CHECK(all_corrupt, "a flipped bit is not reported as corrupt (checksum mismatch)");

	/* Edits with a recomputed checksum reach the later checks. */
	memcpy(f, good, LK_KEYBAG_SIZE);
	f[9] = 2;
	refresh_checksum(f);
	expect_parse(f, LK_KEYBAG_SIZE, LK_UNSUPPORTED, "intact version 2 file");
	memcpy(f, good, LK_KEYBAG_SIZE);
	f[11] |= 2;
	refresh_checksum(f);
	expect_parse(f, LK_KEYBAG_SIZE, LK_CORRUPT, "reserved flag bit");
	memcpy(f, good, LK_KEYBAG_SIZE);
	f[31] = 0; /* t = 0 */
	refresh_checksum(f);
	expect_parse(f, LK_KEYBAG_SIZE, LK_CORRUPT, "t = 0");
	memcpy(f, good, LK_KEYBAG_SIZE);
	f[39] = 17; /* p = 17 */
	refresh_checksum(f);
	expect_parse(f, LK_KEYBAG_SIZE, LK_CORRUPT, "p = 17");
	memcpy(f, good, LK_KEYBAG_SIZE);
	f[120] = 6;
	refresh_checksum(f);
	expect_parse(f, LK_KEYBAG_SIZE, LK_CORRUPT, "entry count 6");
	memcpy(f, good, LK_KEYBAG_SIZE);
	f[121] = 2; /* duplicate class 2 */
	refresh_checksum(f);
	expect_parse(f, LK_KEYBAG_SIZE, LK_CORRUPT, "duplicate class");
	memcpy(f, good, LK_KEYBAG_SIZE);
	f[121 + 61 * 6] = 9;
	refresh_checksum(f);
	expect_parse(f, LK_KEYBAG_SIZE, LK_CORRUPT, "unknown class");
}

/* An edited wrapped key with a recomputed checksum parses, verifies, and fails the GCM tag. */
static void test_tampered_entry(const struct vector *v)
{
	uint8_t f[LK_KEYBAG_SIZE], kek[32], ck[32];
	struct lk_keybag kb;
	const char *reason;

	memcpy(f, v->file, sizeof f);
	f[121 + 1 + 20] ^= 0x80; /* ciphertext of class 1 */
	refresh_checksum(f);
	CHECK(lk_parse(f, sizeof f, &kb, &reason) == LK_OK && lk_check_master(&kb, v->master) == LK_OK &&
	              lk_class_kek(&kb, 1, v->master, NULL, kek) == LK_OK &&
	              lk_unwrap(kek, kb.id, 1, kb.wrapped[0], ck) != 0,
	      "tampered class 1 entry still opens");
	CHECK(lk_change_password(&kb, v->master, NULL, "x", 1, &kb) == LK_CORRUPT,
	      "password change over a tampered entry is not reported as corrupt");
}

/* ---- password change and creation ---- */

static void test_password_change(const struct vector *v)
{
	static const char newpw[] = "a new login password";
	const uint8_t *df = v->has_df ? v->df : NULL;
	struct lk_keybag old, next, again;
	uint8_t m2[32], kek[32], ck[32], f1[LK_KEYBAG_SIZE], f2[LK_KEYBAG_SIZE];
	const char *reason;
	int c;

	CHECK(lk_parse(v->file, LK_KEYBAG_SIZE, &old, &reason) == LK_OK, "%s: parse", v->name);
	CHECK(lk_change_password(&old, v->master, df, newpw, strlen(newpw), &next) == LK_OK, "%s: change", v->name);
	lk_serialize(&next, f1);
	CHECK(lk_parse(f1, sizeof f1, &again, &reason) == LK_OK, "%s: changed keybag parses (%s)", v->name, reason);
	CHECK(memcmp(again.id, old.id, 16) == 0 && again.t == old.t && again.m == old.m && again.p == old.p &&
	              again.flags == old.flags && memcmp(again.seed, old.seed, 32) == 0,
	      "%s: id, parameters, seed kept", v->name);
	CHECK(memcmp(again.salt, old.salt, 16) != 0, "%s: fresh salt", v->name);
	CHECK(memcmp(again.wrapped[2], old.wrapped[2], 60) == 0 && memcmp(again.wrapped[5], old.wrapped[5], 60) == 0,
	      "%s: Always entries byte-identical", v->name);
	for (c = 1; c <= 7; c++)
		if (c != 3 && c != 6)
			CHECK(memcmp(again.wrapped[c - 1], old.wrapped[c - 1], 12) != 0, "%s: fresh nonce for class %d",
			      v->name, c);
	CHECK(lk_check_master(&again, v->master) == LK_WRONG_PASSWORD, "%s: old password still opens", v->name);
	CHECK(lk_master_key(newpw, strlen(newpw), again.salt, again.t, again.m, again.p, m2) == 0 &&
	              lk_check_master(&again, m2) == LK_OK,
	      "%s: new password does not open", v->name);
	for (c = 1; c <= 7; c++)
		CHECK(lk_class_kek(&again, c, m2, df, kek) == LK_OK &&
		              lk_unwrap(kek, again.id, c, again.wrapped[c - 1], ck) == 0 &&
		              memcmp(ck, v->ck[c - 1], 32) == 0,
		      "%s: class %d key after change", v->name, c);
	CHECK(lk_change_password(&old, m2, df, newpw, strlen(newpw), &next) == LK_WRONG_PASSWORD,
	      "%s: change with a wrong old key", v->name);
	if (v->flags & LK_FLAG_DEVICE_BOUND)
		CHECK(lk_change_password(&old, v->master, NULL, newpw, strlen(newpw), &next) == LK_NO_DEVICE_FACTOR,
		      "%s: device-bound change without DF", v->name);
	/* Two changes with the same password differ (salt, nonces): no deterministic re-wrap. */
	CHECK(lk_change_password(&old, v->master, df, newpw, strlen(newpw), &next) == LK_OK, "%s: change again",
	      v->name);
	lk_serialize(&next, f2);
	CHECK(memcmp(f1, f2, sizeof f1) != 0, "%s: two changes gave the same file", v->name);
}

static void test_create(void)
{
	static const uint8_t ms[32] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	uint8_t m[32], salt[16] = { 9 }, df[32], kek[32], ck[32], f[LK_KEYBAG_SIZE];
	struct lk_keybag kb, parsed;
	const char *reason;
	int c, n, bound;

	CHECK(!lk_params_ok(3, 8192, 1, 1, 0) && lk_params_ok(3, 8192, 1, 1, 1) && lk_params_ok(3, 65536, 1, 1, 0) &&
	              lk_params_ok(3, 8192, 1, 0, 0) && !lk_params_ok(0, 65536, 1, 0, 1) &&
	              !lk_params_ok(1, 15, 2, 0, 1) && !lk_params_ok(1, 4194305, 1, 0, 1),
	      "parameter validation");
	CHECK(lk_master_key("pw", 2, salt, 1, 8192, 1, m) == 0, "derive");
	for (bound = 0; bound <= 1; bound++) {
		CHECK(lk_create(&kb, m, salt, 1, 8192, 1, bound ? ms : NULL, 4242) == LK_OK, "create (bound %d)",
		      bound);
		lk_serialize(&kb, f);
		CHECK(lk_parse(f, sizeof f, &parsed, &reason) == LK_OK && parsed.flags == (bound ? 1 : 0) &&
		              lk_check_master(&parsed, m) == LK_OK,
		      "created keybag (bound %d) parses and verifies", bound);
		CHECK(lk_device_factor(ms, 4242, parsed.id, df) == 0, "device factor");
		for (c = 1, n = 0; c <= 7; c++)
			n += lk_class_kek(&parsed, c, m, df, kek) == LK_OK &&
			     lk_unwrap(kek, parsed.id, c, parsed.wrapped[c - 1], ck) == 0;
		CHECK(n == 7, "created keybag (bound %d): %d of 7 classes open", bound, n);
		if (bound) {
			CHECK(lk_device_factor(ms, 4243, parsed.id, df) == 0 &&
			              lk_class_kek(&parsed, 4, m, df, kek) == LK_OK &&
			              lk_unwrap(kek, parsed.id, 4, parsed.wrapped[3], ck) != 0,
			      "another uid's DF opens class 4");
		}
	}
}

/* The PAM limits: the reader accepts what docs/KEYBAG.md allows, but the module never derives from a
 * keybag beyond t 16, m 1 GiB, p 8 (a user-writable file must not hang or starve a root process). */
static void put_be32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24), b[1] = (uint8_t)(v >> 16), b[2] = (uint8_t)(v >> 8), b[3] = (uint8_t)v;
}

static void test_pam_limits(const struct vector *v)
{
	static const struct {
		uint32_t t, m, p;
		int ok;
	} cases[] = {
		{ 16, 1048576, 8, 1 }, { 17, 8192, 1, 0 }, { 4294967295U, 8192, 1, 0 }, { 1, 1048577, 1, 0 },
		{ 1, 4194304, 1, 0 },  { 1, 8192, 9, 0 },  { 1, 8192, 16, 0 },
	};
	uint8_t f[LK_KEYBAG_SIZE], m[32], salt[16] = { 0 };
	struct lk_keybag kb, next;
	const char *reason;
	struct timespec t0, t1;
	size_t i;

	CHECK(LK_PAM_MAX_T == 16 && LK_PAM_MAX_M_KIB == 1048576 && LK_PAM_MAX_P == 8, "the limits changed");
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		memcpy(f, v->file, sizeof f);
		put_be32(f + 28, cases[i].t);
		put_be32(f + 32, cases[i].m);
		put_be32(f + 36, cases[i].p);
		refresh_checksum(f);
		CHECK(lk_parse(f, sizeof f, &kb, &reason) == LK_OK, "case %zu: a valid keybag does not parse (%s)", i,
		      reason);
		CHECK(lk_params_pam_ok(kb.t, kb.m, kb.p) == cases[i].ok, "case %zu: t=%u m=%u p=%u %s", i, kb.t, kb.m,
		      kb.p, cases[i].ok ? "refused" : "accepted");
		if (cases[i].ok)
			continue;
		/* Refused before Argon2 runs: t = 2^32 - 1 would take years, m = 4 GiB would take 4 GiB. */
		clock_gettime(CLOCK_MONOTONIC, &t0);
		CHECK(lk_master_key("pw", 2, kb.salt, kb.t, kb.m, kb.p, m) == -1, "case %zu: derived beyond the limits",
		      i);
		CHECK(lk_change_password(&kb, v->master, NULL, "new", 3, &next) != LK_OK, "case %zu: re-wrapped", i);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		CHECK(t1.tv_sec - t0.tv_sec < 2, "case %zu: the refusal took %ld s", i, (long)(t1.tv_sec - t0.tv_sec));
	}
	CHECK(lk_master_key("pw", 2, salt, 16, 8, 1, m) == 0, "t=16 is within the limits");
}

/* ---- files ---- */

static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	while (d != NULL && (e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
	if (d != NULL)
		closedir(d);
	return n;
}

static int file_equals(const char *path, const uint8_t *want, size_t len)
{
	uint8_t buf[1024];
	size_t n = 0;

	return lk_read_user_file(path, getuid(), buf, sizeof buf, &n) == 0 && n == len && memcmp(buf, want, len) == 0;
}

static void test_files(const uint8_t a[LK_KEYBAG_SIZE], const uint8_t b[LK_KEYBAG_SIZE])
{
	char dir[] = "/tmp/lk-pam-test-XXXXXX", path[256], other[256], sub[256];
	uint8_t buf[LK_KEYBAG_SIZE + 1], ms[32], ms2[32];
	struct stat st;
	size_t n;
	pid_t pid;
	int status = 0, rc;

	if (mkdtemp(dir) == NULL) {
		CHECK(0, "mkdtemp");
		return;
	}
	snprintf(path, sizeof path, "%s/keybag", dir);
	CHECK(lk_write_atomic(path, "0123456789abcdef", a, LK_KEYBAG_SIZE, 1) == 0 &&
	              file_equals(path, a, LK_KEYBAG_SIZE),
	      "atomic write of a new file");
	CHECK(stat(path, &st) == 0 && (st.st_mode & 07777) == 0600, "keybag mode is not 0600");
	CHECK(lk_write_atomic(path, "0123456789abcdee", b, LK_KEYBAG_SIZE, 1) == 0 &&
	              file_equals(path, b, LK_KEYBAG_SIZE) && count_entries(dir) == 1,
	      "atomic replace (and no temporary file left)");
	CHECK(lk_write_atomic(path, "0123456789abcded", a, LK_KEYBAG_SIZE, 0) == EEXIST &&
	              file_equals(path, b, LK_KEYBAG_SIZE) && count_entries(dir) == 1,
	      "create mode must not replace an existing file");

	/* A write that fails half-way (file size limit: write returns EFBIG) leaves the old file. */
	pid = fork();
	if (pid == 0) {
		struct rlimit rl = { 100, 100 };
		signal(SIGXFSZ, SIG_IGN);
		_exit(setrlimit(RLIMIT_FSIZE, &rl) == 0
		              ? lk_write_atomic(path, "00000000000000ff", a, LK_KEYBAG_SIZE, 1)
		              : 99);
	}
	CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == EFBIG,
	      "short write not reported (status %d)", WEXITSTATUS(status));
	CHECK(file_equals(path, b, LK_KEYBAG_SIZE) && count_entries(dir) == 1,
	      "failed write damaged the old file or left a temporary file");

	/* A rename that fails (the target is a non-empty directory) leaves the target and no temp. */
	snprintf(sub, sizeof sub, "%s/occupied", dir);
	snprintf(other, sizeof other, "%s/occupied/x", dir);
	CHECK(mkdir(sub, 0700) == 0 && lk_write_atomic(other, "1111111111111111", a, 10, 1) == 0, "setup");
	rc = lk_write_atomic(sub, "2222222222222222", a, LK_KEYBAG_SIZE, 1);
	CHECK(rc != 0 && count_entries(dir) == 2 && count_entries(sub) == 1, "failed rename: rc %d", rc);

	/* Reading: symlinks, FIFOs, loose permissions, size cap. */
	snprintf(other, sizeof other, "%s/link", dir);
	CHECK(symlink(path, other) == 0 && lk_read_user_file(other, getuid(), buf, sizeof buf, &n) == ELOOP,
	      "a symlink is followed");
	unlink(other);
	CHECK(mkfifo(other, 0600) == 0 && lk_read_user_file(other, getuid(), buf, sizeof buf, &n) == EINVAL,
	      "a FIFO is read");
	unlink(other);
	CHECK(lk_write_atomic(other, "3333333333333333", a, LK_KEYBAG_SIZE, 1) == 0 && chmod(other, 0620) == 0 &&
	              lk_read_user_file(other, getuid(), buf, sizeof buf, &n) == EACCES,
	      "a group-writable file is read");
	CHECK(lk_read_user_file(path, getuid() + 1, buf, sizeof buf, &n) == EPERM, "another user's file is read");
	CHECK(lk_read_user_file(path, getuid(), buf, 100, &n) == EFBIG, "an oversized file is read");
	CHECK(lk_read_user_file(path, getuid(), buf, sizeof buf, &n) == 0 && n == LK_KEYBAG_SIZE, "read back");
	unlink(other);

	snprintf(sub, sizeof sub, "%s/a/b/c", dir);
	CHECK(lk_mkdirs(sub, 0700) == 0 && stat(sub, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700,
	      "mkdirs");

	/* Machine secret: created on first use, stable, and refused when not root-owned 0600 32 bytes. */
	snprintf(other, sizeof other, "%s/var-lib-latchkey/machine-secret", dir);
	if (geteuid() == 0) {
		CHECK(lk_machine_secret(other, ms) == 0 && lk_machine_secret(other, ms2) == 0 &&
		              memcmp(ms, ms2, 32) == 0,
		      "machine secret created and read back");
		CHECK(stat(other, &st) == 0 && (st.st_mode & 07777) == 0600 && st.st_size == 32, "machine secret file");
		snprintf(sub, sizeof sub, "%s/var-lib-latchkey", dir);
		CHECK(stat(sub, &st) == 0 && (st.st_mode & 07777) == 0700 && st.st_uid == 0,
		      "machine secret directory");
		CHECK(chmod(other, 0644) == 0 && lk_machine_secret(other, ms) == EPERM,
		      "a 0644 machine secret is used");
		CHECK(chmod(other, 0600) == 0 && truncate(other, 31) == 0 && lk_machine_secret(other, ms) == EPERM,
		      "a short machine secret is used");
		CHECK(chown(other, 1, 0) == 0 && truncate(other, 32) == 0 && lk_machine_secret(other, ms) == EPERM,
		      "a machine secret not owned by root is used");
	} else {
		printf("  (not root: machine secret checks skipped)\n");
	}
	snprintf(path, sizeof path, "rm -rf '%s'", dir);
	CHECK(system(path) == 0, "cleanup");
}

int main(int argc, char **argv)
{
	struct obj objs[16];
	struct vector *v = calloc(16, sizeof *v);
	char *json = argc > 1 ? slurp(argv[1]) : NULL;
	int i, n, bound = 0;

	if (json == NULL || v == NULL) {
		fprintf(stderr, "usage: test_keybag keybag-v1.json (cannot read it)\n");
		return 2;
	}
	n = split_vectors(json, objs, 16);
	CHECK(n >= 2, "found %d vectors, want at least 2", n);
	for (i = 0; i < n; i++) {
		CHECK(load_vector(objs[i], &v[i]) == 0, "vector %d (%s) is missing fields", i, v[i].name);
		printf("vector %s (t=%ld m=%ld p=%ld flags=%ld)\n", v[i].name, v[i].t, v[i].m, v[i].p, v[i].flags);
		test_vector(&v[i]);
		if (v[i].m <= 65536)
			test_password_change(&v[i]);
		bound += (v[i].flags & LK_FLAG_DEVICE_BOUND) != 0;
	}
	if (bound == 0)
		printf("  (no device-bound vector in the file yet)\n");
	if (n > 0) {
		test_parsing(v[0].file);
		test_tampered_entry(&v[0]);
		test_pam_limits(&v[0]);
	}
	test_create();
	if (n > 1)
		test_files(v[0].file, v[1].file);
	printf("test_keybag: %d checks, %d failed\n", checks, failures);
	free(json);
	free(v);
	return failures == 0 ? 0 : 1;
}
