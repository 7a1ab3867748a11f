#pragma once
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/err.h>
// Asymmetric keys, certificates and PKCS#12 (LatchkeyCrypto/AsymmetricKey*.swift, X509*.swift, PKCS12.swift).
#include <openssl/bn.h>
#include <openssl/rsa.h>
#include <openssl/ec.h>
#include <openssl/encoder.h>
#include <openssl/decoder.h>
#include <openssl/x509.h>
#include <openssl/pkcs12.h>
// The legacy provider, loaded into a library context of its own for PKCS#12 import only (PKCS12.swift).
#include <openssl/provider.h>

// Whether this thread's OpenSSL error queue says an algorithm is not available (no provider offers it,
// or OpenSSL does not know its OID), as opposed to a wrong key or damaged data. Empties the queue.
static inline int latchkey_openssl_unavailable_algorithm(void) {
    int found = 0;
    unsigned long code;
    while ((code = ERR_get_error()) != 0) {
        int reason = ERR_GET_REASON(code);
        if (reason == ERR_R_UNSUPPORTED) found = 1;
        if (ERR_GET_LIB(code) == ERR_LIB_EVP
            && (reason == EVP_R_UNSUPPORTED_ALGORITHM || reason == EVP_R_UNKNOWN_PBE_ALGORITHM
                || reason == EVP_R_UNSUPPORTED_CIPHER || reason == EVP_R_UNKNOWN_CIPHER
                || reason == EVP_R_UNSUPPORTED_PRF || reason == EVP_R_UNSUPPORTED_KEY_DERIVATION_FUNCTION))
            found = 1;
    }
    return found;
}

// --- PKCS#12 key-derivation work, counted before any derivation (PKCS12.swift) ---
// OpenSSL 3.0 reads the MAC, PKCS#12-PBE and PBKDF2 iteration counts up to 2^31-1, so a 1 KB file could
// hold a thread for minutes without its passphrase being known. These functions only decode the
// (public) parameters; they never derive a key (pkcs12_open.h charges each derivation as it runs).

#include <openssl/pkcs7.h>
#include <stdint.h>
#include <string.h>

// What a walk found: the largest single iteration count and their sum, or a refusal.
typedef struct {
    long long largest;
    long long total;
    int bags;        // encrypted bags and safes seen
    int refusal;     // 0, or one of LATCHKEY_P12_*
} latchkey_p12_work;

enum {
    LATCHKEY_P12_UNSUPPORTED_KDF = 1,  // scrypt, or a PBES2 key-derivation function other than PBKDF2
    LATCHKEY_P12_TOO_MANY_BAGS = 2,    // more encrypted bags or safes than the caller accepts, or too deep
    LATCHKEY_P12_MALFORMED = 3,        // an iteration count that is no positive 63-bit integer
};

// An iteration count: 1 when absent (the MAC's DEFAULT 1); -1, and `*refusal` set, for one that is no
// non-negative 63-bit integer.
static inline long long latchkey_p12_integer(const ASN1_INTEGER *iter, int *refusal) {
    int64_t value = 1;
    if (iter != NULL && (ASN1_INTEGER_get_int64(&value, iter) != 1 || value < 0)) {
        ERR_clear_error();
        *refusal = LATCHKEY_P12_MALFORMED;
        return -1;
    }
    return value;
}

static inline void latchkey_p12_add(latchkey_p12_work *work, long long value) {
    if (value > work->largest) work->largest = value;
    // Each count is below 2^63 and there are at most a few hundred: saturate rather than overflow.
    work->total = (work->total > INT64_MAX - value) ? INT64_MAX : work->total + value;
}

static inline void latchkey_p12_count(latchkey_p12_work *work, const ASN1_INTEGER *iter) {
    long long value = latchkey_p12_integer(iter, &work->refusal);
    if (value >= 0) latchkey_p12_add(work, value);
}

// The iterations of the one key derivation a password-based encryption algorithm runs: PKCS#12 or
// PKCS#5 v1 PBE (PBEPARAM), or PBES2 with PBKDF2. 0 for an algorithm whose parameters decode as
// neither, which is left to OpenSSL: it fails on it before deriving anything (it decodes the same
// structures, or does not know the algorithm). Sets `*refusal` for scrypt (or another PBES2 function)
// and for a malformed count.
static inline long long latchkey_p12_iterations(const X509_ALGOR *alg, int *refusal) {
    const ASN1_OBJECT *oid = NULL;
    int ptype = 0;
    const void *pval = NULL;
    X509_ALGOR_get0(&oid, &ptype, &pval, alg);
    if (ptype != V_ASN1_SEQUENCE || pval == NULL) return 0;
    ASN1_TYPE param = {0};
    param.type = V_ASN1_SEQUENCE;
    param.value.sequence = (ASN1_STRING *)pval;
    long long count = 0;
    if (OBJ_obj2nid(oid) != NID_pbes2) {
        PBEPARAM *pbe = ASN1_TYPE_unpack_sequence(ASN1_ITEM_rptr(PBEPARAM), &param);
        if (pbe != NULL) count = latchkey_p12_integer(pbe->iter, refusal);
        PBEPARAM_free(pbe);
        ERR_clear_error();
        return count;
    }
    PBE2PARAM *pbe2 = ASN1_TYPE_unpack_sequence(ASN1_ITEM_rptr(PBE2PARAM), &param);
    if (pbe2 == NULL || pbe2->keyfunc == NULL) {
        PBE2PARAM_free(pbe2);
        ERR_clear_error();
        return 0;
    }
    if (OBJ_obj2nid(pbe2->keyfunc->algorithm) != NID_id_pbkdf2) {
        // scrypt's work (N·r·p, and its memory) is refused outright: no PKCS#12 exporter in use writes it.
        *refusal = LATCHKEY_P12_UNSUPPORTED_KDF;
    } else if (pbe2->keyfunc->parameter != NULL) {
        PBKDF2PARAM *kdf = ASN1_TYPE_unpack_sequence(ASN1_ITEM_rptr(PBKDF2PARAM), pbe2->keyfunc->parameter);
        if (kdf != NULL) count = latchkey_p12_integer(kdf->iter, refusal);
        PBKDF2PARAM_free(kdf);
    }
    PBE2PARAM_free(pbe2);
    ERR_clear_error();
    return count;
}

// One encrypted safe or shrouded key, counted among the bags and its iterations added.
static inline void latchkey_p12_algorithm(latchkey_p12_work *work, const X509_ALGOR *alg, int max_bags) {
    if (alg == NULL || work->refusal != 0) return;
    if (++work->bags > max_bags) {
        work->refusal = LATCHKEY_P12_TOO_MANY_BAGS;
        return;
    }
    long long count = latchkey_p12_iterations(alg, &work->refusal);
    if (work->refusal == 0) latchkey_p12_add(work, count);
}

// The shrouded keys among `bags`, and the bags of nested safeContents (which PKCS12_parse reads too),
// at most `depth` levels down.
static inline void latchkey_p12_bags(latchkey_p12_work *work, const STACK_OF(PKCS12_SAFEBAG) *bags, int max_bags,
                                     int depth) {
    for (int i = 0; i < sk_PKCS12_SAFEBAG_num(bags) && work->refusal == 0; i++) {
        const PKCS12_SAFEBAG *bag = sk_PKCS12_SAFEBAG_value(bags, i);
        switch (PKCS12_SAFEBAG_get_nid(bag)) {
        case NID_pkcs8ShroudedKeyBag: {
            const X509_SIG *sig = PKCS12_SAFEBAG_get0_pkcs8(bag);
            const X509_ALGOR *alg = NULL;
            if (sig != NULL) X509_SIG_get0(sig, &alg, NULL);
            latchkey_p12_algorithm(work, alg, max_bags);
            break;
        }
        case NID_safeContentsBag:
            if (depth <= 0 || ++work->bags > max_bags) {
                work->refusal = LATCHKEY_P12_TOO_MANY_BAGS;
                break;
            }
            latchkey_p12_bags(work, PKCS12_SAFEBAG_get0_safes(bag), max_bags, depth - 1);
            break;
        default: break;
        }
    }
}

// The key-derivation work `p12` shows without its passphrase: its MAC, its encrypted safes and the
// shrouded keys in its plain safes, each once. Returns 0, or -1 when the authenticated safes do not
// decode (the file cannot be opened then).
static inline int latchkey_pkcs12_check(const PKCS12 *p12, int max_bags, latchkey_p12_work *work) {
    memset(work, 0, sizeof(*work));
    if (PKCS12_mac_present(p12)) {
        const ASN1_INTEGER *iter = NULL;
        PKCS12_get0_mac(NULL, NULL, NULL, &iter, p12);
        latchkey_p12_count(work, iter);
    }
    STACK_OF(PKCS7) *safes = PKCS12_unpack_authsafes(p12);
    if (safes == NULL) {
        ERR_clear_error();
        return -1;
    }
    for (int i = 0; i < sk_PKCS7_num(safes) && work->refusal == 0; i++) {
        PKCS7 *p7 = sk_PKCS7_value(safes, i);
        STACK_OF(PKCS12_SAFEBAG) *bags = NULL;
        switch (OBJ_obj2nid(p7->type)) {
        case NID_pkcs7_data:
            bags = PKCS12_unpack_p7data(p7);
            break;
        case NID_pkcs7_encrypted:
            if (p7->d.encrypted != NULL && p7->d.encrypted->enc_data != NULL)
                latchkey_p12_algorithm(work, p7->d.encrypted->enc_data->algorithm, max_bags);
            break;
        default: break;
        }
        if (bags != NULL) latchkey_p12_bags(work, bags, max_bags, 4);
        sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
    }
    sk_PKCS7_pop_free(safes, PKCS7_free);
    ERR_clear_error();
    return 0;
}

#include "pkcs12_open.h"
