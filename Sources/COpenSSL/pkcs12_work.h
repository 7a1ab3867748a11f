#pragma once
// --- PKCS#12 key-derivation work, counted before any derivation (PKCS12.swift) ---
// OpenSSL 3.0 reads the MAC, PKCS#12-PBE and PBKDF2 iteration counts up to 2^31-1, and the file chooses
// what one iteration costs (its digest, and how many output blocks the key and IV need), so a 1 KB file
// could hold a thread for minutes without its passphrase being known. These functions only decode the
// (public) parameters; they never derive a key (pkcs12_open.h charges each derivation as it runs).
//
// Work is counted in units of one PBKDF2-HMAC-SHA256 iteration for one 32-byte output block: a
// derivation costs iterations x output blocks x its digest's weight. Measured with OpenSSL 3.0 on an
// x86-64 with SHA extensions (2 cores, loaded; per iteration of one block): PBKDF2 with HMAC-SHA1 286 ns,
// SHA-256 302 ns, SHA-384 693 ns, SHA-512 679 ns (SHA-224 301, SHA-512/224 667, MD5 397); the PKCS#12
// KDF (one hash per iteration) SHA-1 111 ns, SHA-256 109 ns, SHA-384 294 ns, SHA-512 285 ns. The weights
// round up (HMAC-SHA384/512: 3; the PKCS#12 KDF: 1 whatever its digest), so a cheaper machine's
// ratio (without SHA extensions SHA-256 is the slower one) stays charged in full.

#include <openssl/pkcs7.h>
#include <stdint.h>
#include <string.h>

// What a walk found: the largest single iteration count, the largest single derivation's work and the
// sum of all, the bags and certificates seen, or a refusal.
typedef struct {
    long long iterations;  // the largest iteration count of any one derivation
    long long largest;     // the most work of any one derivation (units above)
    long long total;       // the work of all derivations
    int bags;              // encrypted bags and safes seen
    int certificates;      // certificate bags seen
    int refusal;           // 0, or one of LATCHKEY_P12_*
} latchkey_p12_work;

enum {
    LATCHKEY_P12_UNSUPPORTED_KDF = 1,  // scrypt, or a PBES2 key-derivation function other than PBKDF2
    LATCHKEY_P12_TOO_MANY_BAGS = 2,    // more encrypted bags or safes than the caller accepts, or too deep
    LATCHKEY_P12_MALFORMED = 3,        // an iteration count that is no positive 63-bit integer
    // 4 is LATCHKEY_P12_TOO_MUCH_WORK (pkcs12_open.h)
    LATCHKEY_P12_UNSUPPORTED_DIGEST = 5,    // a PBKDF2 PRF or MAC digest other than SHA-1, -256, -384, -512
    LATCHKEY_P12_TOO_MANY_CERTIFICATES = 6, // more certificate bags than the caller accepts
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

// One derivation: its iteration count and its work.
typedef struct {
    long long iterations;
    long long work;
} latchkey_p12_cost;

// `iterations` x `blocks` x `weight`, saturated (a count may be up to 2^63-1 before the cap refuses it).
static inline latchkey_p12_cost latchkey_p12_cost_of(long long iterations, int blocks, int weight) {
    latchkey_p12_cost cost = {iterations, 0};
    long long factor = (long long)blocks * weight;
    cost.work = (factor > 0 && iterations > INT64_MAX / factor) ? INT64_MAX : iterations * factor;
    return cost;
}

static inline int latchkey_p12_blocks(int length, int size) { return length <= 0 ? 0 : (length + size - 1) / size; }

// The digests the PKCS#12 KDF may use (the MAC's, and SHA-1 for the PKCS#12 PBE schemes; MD5 for the
// PKCS#5 v1 ones, which hash the same way): their output size, and 0 for any other. PKCS#12 files use
// SHA-1 and SHA-256 MACs (OpenSSL, macOS, Windows, Java), SHA-384 and SHA-512 sometimes; others are
// refused rather than weighed, as no exporter in use writes them.
static inline int latchkey_p12_kdf_digest(int nid, int mac) {
    switch (nid) {
    case NID_sha1: return 20;
    case NID_sha256: return 32;
    case NID_sha384: return 48;
    case NID_sha512: return 64;
    case NID_md5: return mac ? 0 : 16;
    default: return 0;
    }
}

// The MAC's derivation: one block of the digest's size, with `iter` iterations.
static inline latchkey_p12_cost latchkey_p12_mac_cost(const X509_ALGOR *digest, const ASN1_INTEGER *iter,
                                                      int *refusal) {
    latchkey_p12_cost none = {0, 0};
    long long iterations = latchkey_p12_integer(iter, refusal);
    if (iterations < 0) return none;
    const ASN1_OBJECT *oid = NULL;
    if (digest != NULL) X509_ALGOR_get0(&oid, NULL, NULL, digest);
    if (oid == NULL || latchkey_p12_kdf_digest(OBJ_obj2nid(oid), 1) == 0) {
        *refusal = LATCHKEY_P12_UNSUPPORTED_DIGEST;
        return none;
    }
    return latchkey_p12_cost_of(iterations, 1, 1);
}

// A PBKDF2 PRF: its output size and weight in `*size` and the return value, 0 for PRFs not accepted.
// Real files use HMAC-SHA1 (the default) and HMAC-SHA256 (OpenSSL 3, Windows, Java), HMAC-SHA384 and
// -SHA512 sometimes; SHA-224, SHA-512/224 and /256, MD5 (and SHA-3, which OpenSSL 3.0 does not take
// here) are refused: no exporter writes them, and the truncated SHA-512s cost four times SHA-256 for
// the same key.
static inline int latchkey_p12_prf(const X509_ALGOR *prf, int *size) {
    int nid = NID_hmacWithSHA1;
    if (prf != NULL) {
        const ASN1_OBJECT *oid = NULL;
        X509_ALGOR_get0(&oid, NULL, NULL, prf);
        nid = OBJ_obj2nid(oid);
    }
    switch (nid) {
    case NID_hmacWithSHA1: *size = 20; return 1;
    case NID_hmacWithSHA256: *size = 32; return 1;
    case NID_hmacWithSHA384: *size = 48; return 3;
    case NID_hmacWithSHA512: *size = 64; return 3;
    default: return 0;
    }
}

// The bytes a cipher's key and IV take (EVP_MAX_KEY_LENGTH and EVP_MAX_IV_LENGTH for one OpenSSL does
// not know, which it then fails on before deriving).
static inline void latchkey_p12_cipher_lengths(int nid, int *key, int *iv) {
    const EVP_CIPHER *cipher = EVP_get_cipherbynid(nid);
    *key = cipher != NULL ? EVP_CIPHER_get_key_length(cipher) : EVP_MAX_KEY_LENGTH;
    *iv = cipher != NULL ? EVP_CIPHER_get_iv_length(cipher) : EVP_MAX_IV_LENGTH;
    ERR_clear_error();
}

// The one key derivation a password-based encryption algorithm runs: PKCS#12 PBE (the PKCS#12 KDF, for
// the key and then the IV) or PKCS#5 v1 PBE (PBEPARAM), or PBES2 with PBKDF2 (the key only: the IV is
// a parameter). Zero for an algorithm whose parameters decode as neither, which is left to OpenSSL: it
// fails on it before deriving anything (it decodes the same structures, or does not know the
// algorithm). Sets `*refusal` for scrypt (or another PBES2 function), a PRF or digest not accepted and
// a malformed count.
static inline latchkey_p12_cost latchkey_p12_algorithm_cost(const X509_ALGOR *alg, int *refusal) {
    latchkey_p12_cost cost = {0, 0};
    const ASN1_OBJECT *oid = NULL;
    int ptype = 0;
    const void *pval = NULL;
    X509_ALGOR_get0(&oid, &ptype, &pval, alg);
    if (ptype != V_ASN1_SEQUENCE || pval == NULL) return cost;
    ASN1_TYPE param = {0};
    param.type = V_ASN1_SEQUENCE;
    param.value.sequence = (ASN1_STRING *)pval;
    if (OBJ_obj2nid(oid) != NID_pbes2) {
        int cipher = NID_undef, digest = NID_undef;
        if (!EVP_PBE_find(EVP_PBE_TYPE_OUTER, OBJ_obj2nid(oid), &cipher, &digest, NULL)) {
            ERR_clear_error();
            return cost;
        }
        PBEPARAM *pbe = ASN1_TYPE_unpack_sequence(ASN1_ITEM_rptr(PBEPARAM), &param);
        long long iterations = pbe != NULL ? latchkey_p12_integer(pbe->iter, refusal) : 0;
        PBEPARAM_free(pbe);
        ERR_clear_error();
        if (pbe == NULL || iterations < 0) return cost;
        int size = latchkey_p12_kdf_digest(digest, 0);
        if (size == 0) {
            *refusal = LATCHKEY_P12_UNSUPPORTED_DIGEST;
            return cost;
        }
        // The PKCS#12 KDF runs once for the key and once more for the IV, each `iterations` per block;
        // PKCS#5 v1 derives both in one block, which this over-counts (harmlessly: its files are rare).
        int key = 0, iv = 0;
        latchkey_p12_cipher_lengths(cipher, &key, &iv);
        return latchkey_p12_cost_of(iterations, latchkey_p12_blocks(key, size) + latchkey_p12_blocks(iv, size), 1);
    }
    PBE2PARAM *pbe2 = ASN1_TYPE_unpack_sequence(ASN1_ITEM_rptr(PBE2PARAM), &param);
    if (pbe2 == NULL || pbe2->keyfunc == NULL || pbe2->encryption == NULL) {
        PBE2PARAM_free(pbe2);
        ERR_clear_error();
        return cost;
    }
    if (OBJ_obj2nid(pbe2->keyfunc->algorithm) != NID_id_pbkdf2) {
        // scrypt's work (N·r·p, and its memory) is refused outright: no PKCS#12 exporter in use writes it.
        *refusal = LATCHKEY_P12_UNSUPPORTED_KDF;
    } else if (pbe2->keyfunc->parameter != NULL) {
        PBKDF2PARAM *kdf = ASN1_TYPE_unpack_sequence(ASN1_ITEM_rptr(PBKDF2PARAM), pbe2->keyfunc->parameter);
        long long iterations = kdf != NULL ? latchkey_p12_integer(kdf->iter, refusal) : -1;
        int size = 0;
        int weight = kdf != NULL ? latchkey_p12_prf(kdf->prf, &size) : 0;
        if (kdf != NULL && iterations >= 0 && weight == 0) *refusal = LATCHKEY_P12_UNSUPPORTED_DIGEST;
        if (iterations >= 0 && weight > 0) {
            // The key is the cipher's length; a keyLength field that differs makes OpenSSL fail before
            // deriving, so the larger of the two (at most EVP_MAX_KEY_LENGTH) is charged.
            int key = 0, iv = 0;
            latchkey_p12_cipher_lengths(OBJ_obj2nid(pbe2->encryption->algorithm), &key, &iv);
            long field = kdf->keylength != NULL ? ASN1_INTEGER_get(kdf->keylength) : 0;
            if (field > key) key = field > EVP_MAX_KEY_LENGTH ? EVP_MAX_KEY_LENGTH : (int)field;
            cost = latchkey_p12_cost_of(iterations, latchkey_p12_blocks(key, size), weight);
        }
        PBKDF2PARAM_free(kdf);
    }
    PBE2PARAM_free(pbe2);
    ERR_clear_error();
    return cost;
}

// Adds one derivation's cost to `work`.
static inline void latchkey_p12_add(latchkey_p12_work *work, latchkey_p12_cost cost) {
    if (cost.iterations > work->iterations) work->iterations = cost.iterations;
    if (cost.work > work->largest) work->largest = cost.work;
    // Each cost is below 2^63 and there are at most a few hundred: saturate rather than overflow.
    work->total = (work->total > INT64_MAX - cost.work) ? INT64_MAX : work->total + cost.work;
}

// The caps a walk checks as it counts (PKCS12.swift sets them).
typedef struct {
    int bags;          // encrypted safes, shrouded keys and nested safes
    int certificates;  // certificate bags
} latchkey_p12_caps;

// One encrypted safe or shrouded key, counted among the bags and its cost added.
static inline void latchkey_p12_algorithm(latchkey_p12_work *work, const X509_ALGOR *alg, latchkey_p12_caps caps) {
    if (alg == NULL || work->refusal != 0) return;
    if (++work->bags > caps.bags) {
        work->refusal = LATCHKEY_P12_TOO_MANY_BAGS;
        return;
    }
    latchkey_p12_cost cost = latchkey_p12_algorithm_cost(alg, &work->refusal);
    if (work->refusal == 0) latchkey_p12_add(work, cost);
}

// The shrouded keys and certificates among `bags`, and the bags of nested safeContents (which
// PKCS12_parse reads too), at most `depth` levels down.
static inline void latchkey_p12_bags(latchkey_p12_work *work, const STACK_OF(PKCS12_SAFEBAG) *bags,
                                     latchkey_p12_caps caps, int depth) {
    for (int i = 0; i < sk_PKCS12_SAFEBAG_num(bags) && work->refusal == 0; i++) {
        const PKCS12_SAFEBAG *bag = sk_PKCS12_SAFEBAG_value(bags, i);
        switch (PKCS12_SAFEBAG_get_nid(bag)) {
        case NID_pkcs8ShroudedKeyBag: {
            const X509_SIG *sig = PKCS12_SAFEBAG_get0_pkcs8(bag);
            const X509_ALGOR *alg = NULL;
            if (sig != NULL) X509_SIG_get0(sig, &alg, NULL);
            latchkey_p12_algorithm(work, alg, caps);
            break;
        }
        case NID_certBag:
            if (++work->certificates > caps.certificates) work->refusal = LATCHKEY_P12_TOO_MANY_CERTIFICATES;
            break;
        case NID_safeContentsBag:
            if (depth <= 0 || ++work->bags > caps.bags) {
                work->refusal = LATCHKEY_P12_TOO_MANY_BAGS;
                break;
            }
            latchkey_p12_bags(work, PKCS12_SAFEBAG_get0_safes(bag), caps, depth - 1);
            break;
        default: break;
        }
    }
}

// The key-derivation work `p12` shows without its passphrase: its MAC, its encrypted safes and the
// shrouded keys in its plain safes, each once; and the certificates of its plain safes. Returns 0, or
// -1 when the authenticated safes do not decode (the file cannot be opened then).
static inline int latchkey_pkcs12_check(const PKCS12 *p12, latchkey_p12_caps caps, latchkey_p12_work *work) {
    memset(work, 0, sizeof(*work));
    if (PKCS12_mac_present(p12)) {
        const X509_ALGOR *digest = NULL;
        const ASN1_INTEGER *iter = NULL;
        PKCS12_get0_mac(NULL, &digest, NULL, &iter, p12);
        latchkey_p12_cost cost = latchkey_p12_mac_cost(digest, iter, &work->refusal);
        if (work->refusal == 0) latchkey_p12_add(work, cost);
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
                latchkey_p12_algorithm(work, p7->d.encrypted->enc_data->algorithm, caps);
            break;
        default: break;
        }
        if (bags != NULL) latchkey_p12_bags(work, bags, caps, 4);
        sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
    }
    sk_PKCS7_pop_free(safes, PKCS7_free);
    ERR_clear_error();
    return 0;
}
