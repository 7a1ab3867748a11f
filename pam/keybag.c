/* The keybag format and its key hierarchy, byte for byte as docs/KEYBAG.md, plus the device factor
 * (flags bit 0). The Swift side (Sources/LatchkeyKeybag) implements the same; both reproduce
 * Tests/LatchkeyKeybagTests/Vectors/keybag-v1.json. */
#include "latchkey.h"

#include <argon2.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>

static const uint8_t MAGIC[8] = { 'L', 'K', 'K', 'E', 'Y', 'B', 'A', 'G' };
static const char VERIFIER_INFO[] = "latchkey keybag v1 verifier"; /* 27 bytes */
static const char CLASS_INFO[] = "latchkey keybag v1 class "; /* 25 bytes, then c */
static const char WRAP_AAD[] = "latchkey keybag v1"; /* 18 bytes, then id, then c */
static const char DEVICE_LABEL[] = "latchkey device factor v1"; /* 25 bytes */

enum {
	OFF_VERSION = 8,
	OFF_FLAGS = 10,
	OFF_ID = 12,
	OFF_T = 28,
	OFF_M = 32,
	OFF_P = 36,
	OFF_SALT = 40,
	OFF_VERIFIER = 56,
	OFF_SEED = 88,
	OFF_COUNT = 120,
	OFF_ENTRIES = 121,
	ENTRY_LEN = 61,
	OFF_CHECKSUM = 548,
	MIN_ANY_VERSION = 44
};

void lk_wipe(void *p, size_t n)
{
	if (p != NULL && n > 0)
		OPENSSL_cleanse(p, n);
}

int lk_random(void *p, size_t n)
{
	return RAND_bytes(p, (int)n) == 1 ? 0 : -1;
}

const char *lk_result_text(enum lk_result r)
{
	switch (r) {
	case LK_OK:
		return "ok";
	case LK_NOT_KEYBAG:
		return "not a latchkey keybag";
	case LK_CORRUPT:
		return "keybag is corrupt";
	case LK_UNSUPPORTED:
		return "keybag format version is newer than this module supports";
	case LK_WRONG_PASSWORD:
		return "wrong keychain password";
	case LK_BAD_PARAMETERS:
		return "Argon2 parameters rejected";
	case LK_NO_DEVICE_FACTOR:
		return "device-bound keybag and no device factor";
	case LK_CRYPTO_ERROR:
		return "cryptographic library failure";
	}
	return "unknown error";
}

static uint32_t get32(const uint8_t *b)
{
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static void put32(uint8_t *b, uint32_t v)
{
	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static int sha256(const uint8_t *in, size_t len, uint8_t out[32])
{
	unsigned int n = 0;
	return EVP_Digest(in, len, out, &n, EVP_sha256(), NULL) == 1 && n == 32 ? 0 : -1;
}

/* Parameter validation ("Reading", step 8); creating adds the 64 MiB floor unless weak is allowed. */
int lk_params_ok(uint32_t t, uint32_t m, uint32_t p, int creating, int allow_weak)
{
	if (t < LK_MIN_T || p < 1 || p > LK_MAX_LANES || m < LK_MIN_KIB_PER_LANE * p || m > LK_MAX_MEMORY_KIB)
		return 0;
	return !creating || allow_weak || m >= LK_MIN_CREATE_MEMORY_KIB;
}

/* The derivation limits (docs/KEYBAG.md, "Derivation limits", keybag_limits.h), on top of lk_params_ok. */
int lk_params_pam_ok(uint32_t t, uint32_t m, uint32_t p)
{
	return t <= LK_PAM_MAX_T && m <= LK_PAM_MAX_M_KIB && p <= LK_PAM_MAX_P;
}

/* "Reading": the checks in the documented order, stopping at the first failure. */
enum lk_result lk_parse(const uint8_t *buf, size_t len, struct lk_keybag *kb, const char **reason)
{
	uint8_t sum[32];
	uint16_t version;
	int i;

	*reason = "";
	if (len < sizeof MAGIC) {
		*reason = "truncated";
		return memcmp(buf, MAGIC, len) == 0 ? LK_CORRUPT : LK_NOT_KEYBAG;
	}
	if (memcmp(buf, MAGIC, sizeof MAGIC) != 0)
		return LK_NOT_KEYBAG;
	if (len < MIN_ANY_VERSION) {
		*reason = "truncated";
		return LK_CORRUPT;
	}
	version = (uint16_t)(buf[OFF_VERSION] << 8 | buf[OFF_VERSION + 1]);
	if (version == 1 && len != LK_KEYBAG_SIZE) {
		*reason = "wrong size";
		return LK_CORRUPT;
	}
	if (sha256(buf, len - 32, sum) != 0)
		return LK_CRYPTO_ERROR;
	if (CRYPTO_memcmp(sum, buf + len - 32, 32) != 0) {
		*reason = "checksum mismatch";
		return LK_CORRUPT;
	}
	if (version != 1)
		return LK_UNSUPPORTED;
	memset(kb, 0, sizeof *kb);
	kb->flags = (uint16_t)(buf[OFF_FLAGS] << 8 | buf[OFF_FLAGS + 1]);
	if (kb->flags & ~LK_FLAG_DEVICE_BOUND) {
		*reason = "unknown flags";
		return LK_CORRUPT;
	}
	kb->t = get32(buf + OFF_T);
	kb->m = get32(buf + OFF_M);
	kb->p = get32(buf + OFF_P);
	if (!lk_params_ok(kb->t, kb->m, kb->p, 0, 1)) {
		*reason = "invalid Argon2 parameters";
		return LK_CORRUPT;
	}
	if (buf[OFF_COUNT] != LK_CLASSES) {
		*reason = "entry count";
		return LK_CORRUPT;
	}
	/* Class byte i + 1 at entry i covers unknown, duplicate and out-of-order classes at once. */
	for (i = 0; i < LK_CLASSES; i++) {
		const uint8_t *e = buf + OFF_ENTRIES + ENTRY_LEN * i;
		if (e[0] != i + 1) {
			*reason = "bad class entry";
			return LK_CORRUPT;
		}
		memcpy(kb->wrapped[i], e + 1, LK_WRAPPED_LEN);
	}
	memcpy(kb->id, buf + OFF_ID, LK_ID_LEN);
	memcpy(kb->salt, buf + OFF_SALT, LK_SALT_LEN);
	memcpy(kb->verifier, buf + OFF_VERIFIER, LK_KEY_LEN);
	memcpy(kb->seed, buf + OFF_SEED, LK_KEY_LEN);
	return LK_OK;
}

void lk_serialize(const struct lk_keybag *kb, uint8_t out[LK_KEYBAG_SIZE])
{
	int i;

	memcpy(out, MAGIC, sizeof MAGIC);
	out[OFF_VERSION] = 0;
	out[OFF_VERSION + 1] = 1;
	out[OFF_FLAGS] = (uint8_t)(kb->flags >> 8);
	out[OFF_FLAGS + 1] = (uint8_t)kb->flags;
	memcpy(out + OFF_ID, kb->id, LK_ID_LEN);
	put32(out + OFF_T, kb->t);
	put32(out + OFF_M, kb->m);
	put32(out + OFF_P, kb->p);
	memcpy(out + OFF_SALT, kb->salt, LK_SALT_LEN);
	memcpy(out + OFF_VERIFIER, kb->verifier, LK_KEY_LEN);
	memcpy(out + OFF_SEED, kb->seed, LK_KEY_LEN);
	out[OFF_COUNT] = LK_CLASSES;
	for (i = 0; i < LK_CLASSES; i++) {
		out[OFF_ENTRIES + ENTRY_LEN * i] = (uint8_t)(i + 1);
		memcpy(out + OFF_ENTRIES + ENTRY_LEN * i + 1, kb->wrapped[i], LK_WRAPPED_LEN);
	}
	/* SHA-256 of 548 bytes cannot fail short of memory exhaustion inside libcrypto; a failure
	 * leaves a zero checksum, which every reader rejects as corrupt. */
	if (sha256(out, OFF_CHECKSUM, out + OFF_CHECKSUM) != 0)
		memset(out + OFF_CHECKSUM, 0, 32);
}

/* M = Argon2id(password, salt, t, m, p), version 0x13, 32 bytes. The password bytes are used raw.
 * Never beyond the PAM limits: this is the module's only derivation, and it runs as root. */
int lk_master_key(const void *pw, size_t pwlen, const uint8_t salt[LK_SALT_LEN], uint32_t t, uint32_t m, uint32_t p,
                  uint8_t out[LK_KEY_LEN])
{
	argon2_context ctx;

	if (!lk_params_ok(t, m, p, 0, 1) || !lk_params_pam_ok(t, m, p) || pwlen > UINT32_MAX)
		return -1;
	memset(&ctx, 0, sizeof ctx);
	ctx.out = out;
	ctx.outlen = LK_KEY_LEN;
	ctx.pwd = (uint8_t *)(uintptr_t)pw; /* read only: ARGON2_FLAG_CLEAR_PASSWORD is not set */
	ctx.pwdlen = (uint32_t)pwlen;
	ctx.salt = (uint8_t *)(uintptr_t)salt;
	ctx.saltlen = LK_SALT_LEN;
	ctx.t_cost = t;
	ctx.m_cost = m;
	ctx.lanes = p;
	ctx.threads = p;
	ctx.version = ARGON2_VERSION_13;
	ctx.flags = ARGON2_DEFAULT_FLAGS;
	if (argon2_ctx(&ctx, Argon2_id) != ARGON2_OK) {
		lk_wipe(out, LK_KEY_LEN);
		return -1;
	}
	return 0;
}

/* HKDF-SHA256(ikm, salt = empty, info, L = 32). */
static int hkdf(const uint8_t *ikm, size_t ikmlen, const uint8_t *info, size_t infolen, uint8_t out[LK_KEY_LEN])
{
	EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
	EVP_KDF_CTX *ctx = kdf != NULL ? EVP_KDF_CTX_new(kdf) : NULL;
	OSSL_PARAM params[4];
	int ok = 0;

	if (ctx != NULL) {
		params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
		params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)(uintptr_t)ikm, ikmlen);
		params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)(uintptr_t)info, infolen);
		params[3] = OSSL_PARAM_construct_end();
		ok = EVP_KDF_derive(ctx, out, LK_KEY_LEN, params) == 1;
	}
	EVP_KDF_CTX_free(ctx);
	EVP_KDF_free(kdf);
	if (!ok)
		lk_wipe(out, LK_KEY_LEN);
	return ok ? 0 : -1;
}

int lk_verifier(const uint8_t master[LK_KEY_LEN], uint8_t out[LK_KEY_LEN])
{
	return hkdf(master, LK_KEY_LEN, (const uint8_t *)VERIFIER_INFO, sizeof VERIFIER_INFO - 1, out);
}

/* Compares V' with the stored V in constant time. */
enum lk_result lk_check_master(const struct lk_keybag *kb, const uint8_t master[LK_KEY_LEN])
{
	uint8_t v[LK_KEY_LEN];
	enum lk_result r = LK_CRYPTO_ERROR;

	if (lk_verifier(master, v) == 0)
		r = CRYPTO_memcmp(v, kb->verifier, LK_KEY_LEN) == 0 ? LK_OK : LK_WRONG_PASSWORD;
	lk_wipe(v, sizeof v);
	return r;
}

/* DF = HMAC-SHA256(key = MS, "latchkey device factor v1" || uid (u32 BE) || keybag id). */
int lk_device_factor(const uint8_t ms[LK_KEY_LEN], uint32_t uid, const uint8_t id[LK_ID_LEN], uint8_t out[LK_KEY_LEN])
{
	uint8_t msg[sizeof DEVICE_LABEL - 1 + 4 + LK_ID_LEN];
	EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	EVP_MAC_CTX *ctx = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
	OSSL_PARAM params[2];
	size_t n = 0;
	int ok = 0;

	memcpy(msg, DEVICE_LABEL, sizeof DEVICE_LABEL - 1);
	put32(msg + sizeof DEVICE_LABEL - 1, uid);
	memcpy(msg + sizeof DEVICE_LABEL - 1 + 4, id, LK_ID_LEN);
	if (ctx != NULL) {
		params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
		params[1] = OSSL_PARAM_construct_end();
		ok = EVP_MAC_init(ctx, ms, LK_KEY_LEN, params) == 1 && EVP_MAC_update(ctx, msg, sizeof msg) == 1 &&
		     EVP_MAC_final(ctx, out, &n, LK_KEY_LEN) == 1 && n == LK_KEY_LEN;
	}
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	if (!ok)
		lk_wipe(out, LK_KEY_LEN);
	return ok ? 0 : -1;
}

static int is_always(int c)
{
	return c == 3 || c == 6;
}
static int this_device_only(int c)
{
	return c >= 4;
}

/* KEK_c: ikm is M (password classes) or S (Always classes), followed by DF for classes 4-7 of a
 * device-bound keybag. `master` may be NULL when only Always classes are asked for. */
enum lk_result lk_class_kek(const struct lk_keybag *kb, int c, const uint8_t *master, const uint8_t *df,
                            uint8_t out[LK_KEY_LEN])
{
	uint8_t ikm[2 * LK_KEY_LEN], info[sizeof CLASS_INFO];
	size_t ikmlen = LK_KEY_LEN;
	int rc;

	if (c < 1 || c > LK_CLASSES || (!is_always(c) && master == NULL))
		return LK_CRYPTO_ERROR;
	memcpy(ikm, is_always(c) ? kb->seed : master, LK_KEY_LEN);
	if ((kb->flags & LK_FLAG_DEVICE_BOUND) && this_device_only(c)) {
		if (df == NULL) {
			lk_wipe(ikm, sizeof ikm);
			return LK_NO_DEVICE_FACTOR;
		}
		memcpy(ikm + LK_KEY_LEN, df, LK_KEY_LEN);
		ikmlen += LK_KEY_LEN;
	}
	memcpy(info, CLASS_INFO, sizeof CLASS_INFO - 1);
	info[sizeof CLASS_INFO - 1] = (uint8_t)c;
	rc = hkdf(ikm, ikmlen, info, sizeof info, out);
	lk_wipe(ikm, sizeof ikm);
	return rc == 0 ? LK_OK : LK_CRYPTO_ERROR;
}

static void wrap_aad(uint8_t aad[18 + LK_ID_LEN + 1], const uint8_t id[LK_ID_LEN], int c)
{
	memcpy(aad, WRAP_AAD, 18);
	memcpy(aad + 18, id, LK_ID_LEN);
	aad[18 + LK_ID_LEN] = (uint8_t)c;
}

/* W_c = nonce || AES-256-GCM(KEK_c, nonce, aad = "latchkey keybag v1" || id || c, CK_c) || tag. */
int lk_wrap(const uint8_t kek[LK_KEY_LEN], const uint8_t id[LK_ID_LEN], int c, const uint8_t nonce[LK_NONCE_LEN],
            const uint8_t ck[LK_KEY_LEN], uint8_t out[LK_WRAPPED_LEN])
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	uint8_t aad[18 + LK_ID_LEN + 1];
	int n = 0, m = 0, ok;

	wrap_aad(aad, id, c);
	memcpy(out, nonce, LK_NONCE_LEN);
	ok = ctx != NULL && EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, kek, nonce) == 1 &&
	     EVP_EncryptUpdate(ctx, NULL, &n, aad, sizeof aad) == 1 &&
	     EVP_EncryptUpdate(ctx, out + LK_NONCE_LEN, &n, ck, LK_KEY_LEN) == 1 && n == LK_KEY_LEN &&
	     EVP_EncryptFinal_ex(ctx, out + LK_NONCE_LEN + n, &m) == 1 && m == 0 &&
	     EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, out + LK_NONCE_LEN + LK_KEY_LEN) == 1;
	EVP_CIPHER_CTX_free(ctx);
	return ok ? 0 : -1;
}

/* Opens W_c; -1 on a tag failure (or a library failure), and `ck` is then zero. */
int lk_unwrap(const uint8_t kek[LK_KEY_LEN], const uint8_t id[LK_ID_LEN], int c, const uint8_t in[LK_WRAPPED_LEN],
              uint8_t ck[LK_KEY_LEN])
{
	EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
	uint8_t aad[18 + LK_ID_LEN + 1], tag[16];
	int n = 0, m = 0, ok;

	wrap_aad(aad, id, c);
	memcpy(tag, in + LK_NONCE_LEN + LK_KEY_LEN, sizeof tag);
	ok = ctx != NULL && EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, kek, in) == 1 &&
	     EVP_DecryptUpdate(ctx, NULL, &n, aad, sizeof aad) == 1 &&
	     EVP_DecryptUpdate(ctx, ck, &n, in + LK_NONCE_LEN, LK_KEY_LEN) == 1 && n == LK_KEY_LEN &&
	     EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, sizeof tag, tag) == 1 &&
	     EVP_DecryptFinal_ex(ctx, ck + n, &m) == 1 && m == 0;
	EVP_CIPHER_CTX_free(ctx);
	if (!ok)
		lk_wipe(ck, LK_KEY_LEN);
	return ok ? 0 : -1;
}

/* Fills the verifier and all seven entries of `kb`, whose flags, id, parameters, salt and seed are
 * already set, from M, DF (device-bound only), the class keys and the nonces. */
enum lk_result lk_build(struct lk_keybag *kb, const uint8_t master[LK_KEY_LEN], const uint8_t *df,
                        const uint8_t ck[LK_CLASSES][LK_KEY_LEN], const uint8_t nonces[LK_CLASSES][LK_NONCE_LEN])
{
	uint8_t kek[LK_KEY_LEN];
	enum lk_result r = LK_OK;
	int c;

	if (lk_verifier(master, kb->verifier) != 0)
		return LK_CRYPTO_ERROR;
	for (c = 1; c <= LK_CLASSES && r == LK_OK; c++) {
		r = lk_class_kek(kb, c, master, df, kek);
		if (r == LK_OK && lk_wrap(kek, kb->id, c, nonces[c - 1], ck[c - 1], kb->wrapped[c - 1]) != 0)
			r = LK_CRYPTO_ERROR;
	}
	lk_wipe(kek, sizeof kek);
	return r;
}

/* A new keybag from M (derived by the caller with `salt` and t, m, p), with random id, always seed,
 * class keys and nonces. Device-bound when the machine secret `ms` is given. */
enum lk_result lk_create(struct lk_keybag *kb, const uint8_t master[LK_KEY_LEN], const uint8_t salt[LK_SALT_LEN],
                         uint32_t t, uint32_t m, uint32_t p, const uint8_t *ms, uint32_t uid)
{
	uint8_t ck[LK_CLASSES][LK_KEY_LEN], nonces[LK_CLASSES][LK_NONCE_LEN], df[LK_KEY_LEN];
	enum lk_result r = LK_CRYPTO_ERROR;

	memset(kb, 0, sizeof *kb);
	kb->flags = ms != NULL ? LK_FLAG_DEVICE_BOUND : 0;
	kb->t = t;
	kb->m = m;
	kb->p = p;
	memcpy(kb->salt, salt, LK_SALT_LEN);
	if (lk_random(kb->id, sizeof kb->id) == 0 && lk_random(kb->seed, sizeof kb->seed) == 0 &&
	    lk_random(ck, sizeof ck) == 0 && lk_random(nonces, sizeof nonces) == 0 &&
	    (ms == NULL || lk_device_factor(ms, uid, kb->id, df) == 0))
		r = lk_build(kb, master, ms != NULL ? df : NULL, (const uint8_t(*)[LK_KEY_LEN])ck,
		             (const uint8_t(*)[LK_NONCE_LEN])nonces);
	lk_wipe(ck, sizeof ck);
	lk_wipe(df, sizeof df);
	if (r != LK_OK)
		lk_wipe(kb, sizeof *kb);
	return r;
}

/* "Password change": same id, parameters, class keys, always seed and Always entries; a fresh salt
 * and a fresh nonce for each re-wrapped password class. */
enum lk_result lk_change_password(const struct lk_keybag *old, const uint8_t old_master[LK_KEY_LEN], const uint8_t *df,
                                  const void *pw, size_t pwlen, struct lk_keybag *out)
{
	uint8_t master[LK_KEY_LEN], kek[LK_KEY_LEN], ck[LK_KEY_LEN], nonce[LK_NONCE_LEN];
	enum lk_result r = lk_check_master(old, old_master);
	int c;

	if (r != LK_OK)
		return r;
	*out = *old;
	if (lk_random(out->salt, sizeof out->salt) != 0 ||
	    lk_master_key(pw, pwlen, out->salt, out->t, out->m, out->p, master) != 0 ||
	    lk_verifier(master, out->verifier) != 0)
		r = LK_CRYPTO_ERROR;
	for (c = 1; c <= LK_CLASSES && r == LK_OK; c++) {
		if (is_always(c))
			continue;
		r = lk_class_kek(old, c, old_master, df, kek);
		if (r == LK_OK && lk_unwrap(kek, old->id, c, old->wrapped[c - 1], ck) != 0)
			r = LK_CORRUPT; /* good verifier, bad entry */
		if (r == LK_OK)
			r = lk_class_kek(out, c, master, df, kek);
		if (r == LK_OK && (lk_random(nonce, sizeof nonce) != 0 ||
		                   lk_wrap(kek, out->id, c, nonce, ck, out->wrapped[c - 1]) != 0))
			r = LK_CRYPTO_ERROR;
	}
	lk_wipe(master, sizeof master);
	lk_wipe(kek, sizeof kek);
	lk_wipe(ck, sizeof ck);
	if (r != LK_OK)
		lk_wipe(out, sizeof *out);
	return r;
}
