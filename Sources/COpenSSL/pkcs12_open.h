#pragma once
// --- Opening a PKCS#12 file once its MAC verified, or without one (PKCS12.swift) ---
// What OpenSSL 3.0's PKCS12_parse does after its MAC check (parse_pk12, parse_bags, parse_bag and the
// split of the certificates), done here because PKCS12_parse
// - verifies the MAC again, one or two more derivations after the caller's own;
// - decrypts a file without a MAC opened with an empty passphrase with the absent password only, never
//   with the empty one (two zero bytes), which is what `openssl pkcs12 -export -passout pass:` writes;
// - runs every decryption in the one library context it is called in, so that a file with one legacy
//   cipher (RC2-40) was decrypted in the default context first, deriving keys for nothing.
// Here the caller chooses the passphrase's form, each decryption runs in the context that has its
// cipher (found before anything is derived), each key derivation, the MAC's too, is charged to the
// import's budget before it runs, only RSA and EC keys are decoded (key_algorithms.h), and the
// certificates are counted.

// One import's key-derivation budget, all attempts together.
typedef struct {
    latchkey_p12_work work;      // what was charged: the largest count and work, the total; the walk's
                                 // bags and certificates; a refusal
    long long max_iterations;    // iterations of any one derivation
    long long max_work;          // work of any one derivation (shim.h's units)
    long long max_total;         // work of all of them
    latchkey_p12_caps caps;      // bags and certificates in one walk
    int derivations;             // derivations run: the MAC's, each safe's and each key's
    OSSL_LIB_CTX *legacy;        // a context with the legacy provider, or NULL
} latchkey_p12_budget;

// How a step or a walk ended.
enum {
    LATCHKEY_P12_OPENED = 0,      // done (the MAC verified, the walk read everything)
    LATCHKEY_P12_FAILED = 1,      // did not verify (the MAC), or did not decode (the structure, a certificate)
    LATCHKEY_P12_UNREADABLE = 2,  // an algorithm no context here has
    LATCHKEY_P12_REFUSED = 3,     // past the budget or a cap, or scrypt: see work.refusal
    LATCHKEY_P12_RUN = 4,         // (a step) go on: the derivation is charged
    LATCHKEY_P12_UNDECRYPTED = 5, // a decryption failed: the passphrase (or its form) is wrong, or damage
    LATCHKEY_P12_OTHER_KEY = 6,   // the key is neither RSA nor EC: not decoded
    LATCHKEY_P12_BAD_KEY = 7,     // the key (RSA or EC) does not decode
};

// latchkey_p12_work.refusal when a derivation would pass the budget (work.largest or work.total says which).
enum { LATCHKEY_P12_TOO_MUCH_WORK = 4 };

// Charges one derivation: 1 when it may run, 0 (refused) when it would pass a cap.
static inline int latchkey_p12_charge(latchkey_p12_budget *budget, latchkey_p12_cost cost) {
    latchkey_p12_add(&budget->work, cost);
    if (cost.iterations > budget->max_iterations || cost.work > budget->max_work
        || budget->work.total > budget->max_total) {
        budget->work.refusal = LATCHKEY_P12_TOO_MUCH_WORK;
        return 0;
    }
    budget->derivations++;
    return 1;
}

// FAILED, or UNREADABLE when the error queue says an algorithm is missing. Empties the queue.
static inline int latchkey_p12_failure(void) {
    return latchkey_openssl_unavailable_algorithm() ? LATCHKEY_P12_UNREADABLE : LATCHKEY_P12_FAILED;
}

// A decryption that failed: UNREADABLE when the error queue says an algorithm is missing, UNDECRYPTED
// otherwise. Empties the queue.
static inline int latchkey_p12_undecrypted(void) {
    return latchkey_openssl_unavailable_algorithm() ? LATCHKEY_P12_UNREADABLE : LATCHKEY_P12_UNDECRYPTED;
}

// Decodes `p8` into `*pkey` when it is an RSA or EC key (OTHER_KEY, undecoded, otherwise).
static inline int latchkey_p12_key(const PKCS8_PRIV_KEY_INFO *p8, EVP_PKEY **pkey) {
    if (latchkey_pkcs8_algorithm(p8) == LATCHKEY_KEY_OTHER) return LATCHKEY_P12_OTHER_KEY;
    *pkey = EVP_PKCS82PKEY(p8);
    ERR_clear_error();
    return *pkey != NULL ? LATCHKEY_P12_OPENED : LATCHKEY_P12_BAD_KEY;
}

// The context that can decrypt with `alg`, found without deriving anything: NULL in `*context` for this
// thread's default one, the legacy one, or UNREADABLE when neither has its cipher (or OpenSSL does not
// know the algorithm). PBES2 parameters that do not decode are left to OpenSSL in the default context,
// which fails on them before deriving.
static inline int latchkey_p12_context(const X509_ALGOR *alg, OSSL_LIB_CTX *legacy, OSSL_LIB_CTX **context) {
    *context = NULL;
    const ASN1_OBJECT *oid = NULL;
    int ptype = 0;
    const void *pval = NULL;
    X509_ALGOR_get0(&oid, &ptype, &pval, alg);
    int cipher = NID_undef;
    if (OBJ_obj2nid(oid) == NID_pbes2) {
        if (ptype != V_ASN1_SEQUENCE || pval == NULL) return LATCHKEY_P12_RUN;
        ASN1_TYPE param = {0};
        param.type = V_ASN1_SEQUENCE;
        param.value.sequence = (ASN1_STRING *)pval;
        PBE2PARAM *pbe2 = ASN1_TYPE_unpack_sequence(ASN1_ITEM_rptr(PBE2PARAM), &param);
        if (pbe2 == NULL || pbe2->encryption == NULL) {
            PBE2PARAM_free(pbe2);
            ERR_clear_error();
            return LATCHKEY_P12_RUN;
        }
        cipher = OBJ_obj2nid(pbe2->encryption->algorithm);
        PBE2PARAM_free(pbe2);
    } else {
        // The PKCS#12 and PKCS#5 v1 schemes name their cipher; OpenSSL would find it with
        // EVP_get_cipherbynid even where no provider implements it, and derive the key before failing.
        int digest = NID_undef;
        EVP_PBE_KEYGEN *keygen = NULL;
        if (!EVP_PBE_find(EVP_PBE_TYPE_OUTER, OBJ_obj2nid(oid), &cipher, &digest, &keygen))
            return LATCHKEY_P12_UNREADABLE;
    }
    if (cipher == NID_undef || cipher == -1) return LATCHKEY_P12_UNREADABLE;
    const char *name = OBJ_nid2sn(cipher);
    EVP_CIPHER *found = name == NULL ? NULL : EVP_CIPHER_fetch(NULL, name, NULL);
    if (found == NULL && name != NULL && legacy != NULL) {
        found = EVP_CIPHER_fetch(legacy, name, NULL);
        if (found != NULL) *context = legacy;
    }
    ERR_clear_error();
    if (found == NULL) return LATCHKEY_P12_UNREADABLE;
    EVP_CIPHER_free(found);
    return LATCHKEY_P12_RUN;
}

// Before a decryption with `alg`: counts it among the walk's bags, finds its context and charges its
// derivation. RUN, with `*context` (NULL: this thread's default), or how to stop.
static inline int latchkey_p12_step(latchkey_p12_budget *budget, const X509_ALGOR *alg, OSSL_LIB_CTX **context) {
    *context = NULL;
    if (alg == NULL) return LATCHKEY_P12_FAILED;  // OpenSSL fails on it too, before deriving
    if (++budget->work.bags > budget->caps.bags) {
        budget->work.refusal = LATCHKEY_P12_TOO_MANY_BAGS;
        return LATCHKEY_P12_REFUSED;
    }
    latchkey_p12_cost cost = latchkey_p12_algorithm_cost(alg, &budget->work.refusal);
    if (budget->work.refusal != 0) return LATCHKEY_P12_REFUSED;
    int found = latchkey_p12_context(alg, budget->legacy, context);
    if (found != LATCHKEY_P12_RUN) return found;
    return latchkey_p12_charge(budget, cost) ? LATCHKEY_P12_RUN : LATCHKEY_P12_REFUSED;
}

// PKCS12_verify_mac with `pass` (NULL: the absent password) of `passlen` bytes, charged first.
static inline int latchkey_pkcs12_verify_mac(PKCS12 *p12, const char *pass, int passlen,
                                             latchkey_p12_budget *budget) {
    const X509_ALGOR *digest = NULL;
    const ASN1_INTEGER *iter = NULL;
    PKCS12_get0_mac(NULL, &digest, NULL, &iter, p12);
    latchkey_p12_cost cost = latchkey_p12_mac_cost(digest, iter, &budget->work.refusal);
    if (budget->work.refusal != 0 || !latchkey_p12_charge(budget, cost)) return LATCHKEY_P12_REFUSED;
    return PKCS12_verify_mac(p12, pass, passlen) == 1 ? LATCHKEY_P12_OPENED : latchkey_p12_failure();
}

static inline int latchkey_p12_open_bags(latchkey_p12_budget *budget, const STACK_OF(PKCS12_SAFEBAG) *bags,
                                         const char *pass, int passlen, EVP_PKEY **pkey, STACK_OF(X509) *certs,
                                         int depth);

// One bag, as parse_bag: the first key (a plain or a shrouded one; later keys are skipped, undecrypted;
// one that is neither RSA nor EC ends the walk undecoded), each X.509 certificate with its localKeyID
// and friendlyName (at most caps.certificates in all), nested safes.
static inline int latchkey_p12_open_bag(latchkey_p12_budget *budget, const PKCS12_SAFEBAG *bag,
                                        const char *pass, int passlen, EVP_PKEY **pkey, STACK_OF(X509) *certs,
                                        int depth) {
    switch (PKCS12_SAFEBAG_get_nid(bag)) {
    case NID_keyBag:
        if (*pkey != NULL) return LATCHKEY_P12_OPENED;
        return latchkey_p12_key(PKCS12_SAFEBAG_get0_p8inf(bag), pkey);
    case NID_pkcs8ShroudedKeyBag: {
        if (*pkey != NULL) return LATCHKEY_P12_OPENED;
        const X509_SIG *sig = PKCS12_SAFEBAG_get0_pkcs8(bag);
        const X509_ALGOR *alg = NULL;
        if (sig != NULL) X509_SIG_get0(sig, &alg, NULL);
        OSSL_LIB_CTX *context = NULL;
        int step = latchkey_p12_step(budget, alg, &context);
        if (step != LATCHKEY_P12_RUN) return step;
        OSSL_LIB_CTX *previous = context != NULL ? OSSL_LIB_CTX_set0_default(context) : NULL;
        if (context != NULL && previous == NULL) return LATCHKEY_P12_UNREADABLE;
        PKCS8_PRIV_KEY_INFO *p8 = PKCS12_decrypt_skey(bag, pass, passlen);
        if (previous != NULL) OSSL_LIB_CTX_set0_default(previous);
        if (p8 == NULL) return latchkey_p12_undecrypted();
        // Decoded in the default context, whatever decrypted it; freeing a PKCS8_PRIV_KEY_INFO cleanses it.
        int decoded = latchkey_p12_key(p8, pkey);
        PKCS8_PRIV_KEY_INFO_free(p8);
        return decoded;
    }
    case NID_certBag: {
        // Counted before it is decoded, as the check counts the plain ones: each costs a parse here and
        // more in PKCS12.swift (94,004 tiny ones, 16 MiB, took 40 s and 0.5 GB before the cap).
        if (++budget->work.certificates > budget->caps.certificates) {
            budget->work.refusal = LATCHKEY_P12_TOO_MANY_CERTIFICATES;
            return LATCHKEY_P12_REFUSED;
        }
        if (PKCS12_SAFEBAG_get_bag_nid(bag) != NID_x509Certificate) return LATCHKEY_P12_OPENED;
        X509 *x509 = PKCS12_SAFEBAG_get1_cert(bag);
        if (x509 == NULL) return latchkey_p12_failure();
        // The attributes' types are checked (OpenSSL 3.0 reads them as the type it expects).
        const ASN1_TYPE *id = PKCS12_SAFEBAG_get0_attr(bag, NID_localKeyID);
        const ASN1_TYPE *name = PKCS12_SAFEBAG_get0_attr(bag, NID_friendlyName);
        int kept = 1;
        if (id != NULL && id->type == V_ASN1_OCTET_STRING)
            kept = X509_keyid_set1(x509, id->value.octet_string->data, id->value.octet_string->length);
        if (kept && name != NULL && name->type == V_ASN1_BMPSTRING) {
            unsigned char *utf8 = NULL;
            int length = ASN1_STRING_to_UTF8(&utf8, name->value.bmpstring);
            if (length >= 0) {
                kept = X509_alias_set1(x509, utf8, length);
                OPENSSL_free(utf8);
            }
            ERR_clear_error();
        }
        if (!kept || !sk_X509_push(certs, x509)) {
            X509_free(x509);
            return LATCHKEY_P12_FAILED;
        }
        return LATCHKEY_P12_OPENED;
    }
    case NID_safeContentsBag:
        if (depth <= 0 || ++budget->work.bags > budget->caps.bags) {
            budget->work.refusal = LATCHKEY_P12_TOO_MANY_BAGS;
            return LATCHKEY_P12_REFUSED;
        }
        return latchkey_p12_open_bags(budget, PKCS12_SAFEBAG_get0_safes(bag), pass, passlen, pkey, certs, depth - 1);
    default: return LATCHKEY_P12_OPENED;
    }
}

static inline int latchkey_p12_open_bags(latchkey_p12_budget *budget, const STACK_OF(PKCS12_SAFEBAG) *bags,
                                         const char *pass, int passlen, EVP_PKEY **pkey, STACK_OF(X509) *certs,
                                         int depth) {
    int outcome = LATCHKEY_P12_OPENED;
    for (int i = 0; i < sk_PKCS12_SAFEBAG_num(bags) && outcome == LATCHKEY_P12_OPENED; i++)
        outcome = latchkey_p12_open_bag(budget, sk_PKCS12_SAFEBAG_value(bags, i), pass, passlen, pkey, certs, depth);
    return outcome;
}

// Reads `p12` with `pass` (NULL: the absent password) of `passlen` bytes, without checking its MAC: the
// first private key into `*pkey`, the first certificate that matches it into `*cert`, the others, in
// file order, into `*ca` (NULL when there are none), as PKCS12_parse does. On anything but OPENED
// the three are NULL. Nested safes go at most 4 deep, as latchkey_pkcs12_check counts them. A failed
// decryption is UNDECRYPTED; a structure or certificate that does not decode, FAILED.
static inline int latchkey_pkcs12_open(PKCS12 *p12, const char *pass, int passlen, latchkey_p12_budget *budget,
                                       EVP_PKEY **pkey, X509 **cert, STACK_OF(X509) **ca) {
    *pkey = NULL;
    *cert = NULL;
    *ca = NULL;
    budget->work.bags = 0;
    budget->work.certificates = 0;
    STACK_OF(X509) *certs = sk_X509_new_null();
    STACK_OF(PKCS7) *safes = certs != NULL ? PKCS12_unpack_authsafes(p12) : NULL;
    int outcome = safes != NULL ? LATCHKEY_P12_OPENED : LATCHKEY_P12_FAILED;
    for (int i = 0; i < sk_PKCS7_num(safes) && outcome == LATCHKEY_P12_OPENED; i++) {
        PKCS7 *p7 = sk_PKCS7_value(safes, i);
        STACK_OF(PKCS12_SAFEBAG) *bags = NULL;
        switch (OBJ_obj2nid(p7->type)) {
        case NID_pkcs7_data:
            bags = PKCS12_unpack_p7data(p7);
            if (bags == NULL) outcome = latchkey_p12_failure();
            break;
        case NID_pkcs7_encrypted: {
            const X509_ALGOR *alg = NULL;
            if (p7->d.encrypted != NULL && p7->d.encrypted->enc_data != NULL)
                alg = p7->d.encrypted->enc_data->algorithm;
            OSSL_LIB_CTX *context = NULL;
            outcome = latchkey_p12_step(budget, alg, &context);
            if (outcome != LATCHKEY_P12_RUN) break;
            OSSL_LIB_CTX *previous = context != NULL ? OSSL_LIB_CTX_set0_default(context) : NULL;
            if (context != NULL && previous == NULL) {
                outcome = LATCHKEY_P12_UNREADABLE;
                break;
            }
            bags = PKCS12_unpack_p7encdata(p7, pass, passlen);
            if (previous != NULL) OSSL_LIB_CTX_set0_default(previous);
            outcome = bags != NULL ? LATCHKEY_P12_OPENED : latchkey_p12_undecrypted();
            break;
        }
        default: break;  // other content types are skipped, as PKCS12_parse skips them
        }
        if (bags != NULL) outcome = latchkey_p12_open_bags(budget, bags, pass, passlen, pkey, certs, 4);
        sk_PKCS12_SAFEBAG_pop_free(bags, PKCS12_SAFEBAG_free);
    }
    sk_PKCS7_pop_free(safes, PKCS7_free);
    // Taken by index (each slot emptied as it is taken), in file order: shifting each off the front
    // moved all the others every time.
    for (int i = 0; outcome == LATCHKEY_P12_OPENED && i < sk_X509_num(certs); i++) {
        X509 *x509 = sk_X509_value(certs, i);
        if (*pkey != NULL && *cert == NULL) {
            ERR_set_mark();
            int match = X509_check_private_key(x509, *pkey);
            ERR_pop_to_mark();
            if (match) {
                *cert = x509;
                sk_X509_set(certs, i, NULL);
                continue;
            }
        }
        if ((*ca == NULL && (*ca = sk_X509_new_null()) == NULL) || !sk_X509_push(*ca, x509)) {
            outcome = LATCHKEY_P12_FAILED;
            break;
        }
        sk_X509_set(certs, i, NULL);
    }
    sk_X509_pop_free(certs, X509_free);  // X509_free(NULL) does nothing
    if (outcome != LATCHKEY_P12_OPENED) {
        EVP_PKEY_free(*pkey);
        X509_free(*cert);
        sk_X509_pop_free(*ca, X509_free);
        *pkey = NULL;
        *cert = NULL;
        *ca = NULL;
    }
    ERR_clear_error();
    return outcome;
}
