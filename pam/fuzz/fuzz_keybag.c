/* libFuzzer: the keybag parser (keybag.c, lk_parse) on any bytes, as the module reads a file the user
 * can write. Each input is parsed as it is and, when it could be a keybag, once more with its
 * checksum made valid: almost nothing random gets past SHA-256, and the checks behind it (flags,
 * Argon2 parameters, class entries) are the interesting ones. A keybag that parses must serialize to
 * the very same bytes (pam_sm_chauthtok relies on it), and its Always classes, which need no
 * password, are unwrapped as the agent would. ASan and UBSan (no recovery) turn any out-of-bounds
 * access or undefined arithmetic into a crash; so does abort() on a broken property.
 *
 *   make -C pam fuzz FUZZ_SECONDS=60 */
#include "latchkey.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>

enum { MIN_ANY_VERSION = 44, RESEAL_CAP = 4096 };

static void parse(const uint8_t *buf, size_t len)
{
	static const uint8_t master[LK_KEY_LEN] = { 1 };
	uint8_t out[LK_KEYBAG_SIZE], kek[LK_KEY_LEN], ck[LK_KEY_LEN];
	struct lk_keybag kb;
	const char *reason = NULL;
	enum lk_result r = lk_parse(buf, len, &kb, &reason);
	int c;

	if (reason == NULL || lk_result_text(r) == NULL)
		abort();
	if (r != LK_OK)
		return;
	lk_serialize(&kb, out);
	if (len != LK_KEYBAG_SIZE || memcmp(out, buf, len) != 0)
		abort(); /* parsing is not canonical */
	(void)lk_params_pam_ok(kb.t, kb.m, kb.p);
	(void)lk_check_master(&kb, master);
	for (c = 1; c <= LK_CLASSES; c++)
		if (lk_class_kek(&kb, c, master, NULL, kek) == LK_OK)
			(void)lk_unwrap(kek, kb.id, c, kb.wrapped[c - 1], ck);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned int n = 0;
	uint8_t *copy;

	parse(data, size);
	if (size < MIN_ANY_VERSION || size > RESEAL_CAP || memcmp(data, "LKKEYBAG", 8) != 0)
		return 0;
	if ((copy = malloc(size)) == NULL)
		return 0;
	memcpy(copy, data, size);
	if (EVP_Digest(copy, size - 32, copy + size - 32, &n, EVP_sha256(), NULL) == 1 && n == 32)
		parse(copy, size);
	free(copy);
	return 0;
}
