#pragma once
// --- Which keys are decoded from outside (PKCS12.swift, AsymmetricKey+Formats.swift) ---
// latchkey uses RSA and EC keys only, and decodes nothing else: OpenSSL's decoders for other types do
// work the file chooses before anything could refuse the key (DSA computes its public key g^x mod p
// with p uncapped: a 32768-bit key took 8 s, and the cost is cubic in the size). So a key's algorithm
// OID is read first, and only rsaEncryption and id-ecPublicKey keys reach a decoder. (RSA-PSS keys are
// not supported either: AsymmetricKey refuses them once decoded.) Decoding an RSA key does no
// arithmetic (a 1,048,576-bit one decodes in milliseconds), and AsymmetricKey refuses one outside
// 512-8192 bits before any operation uses it; EC curves are named or capped by OpenSSL at 661 bits.

// What reading a key's algorithm found.
enum {
    LATCHKEY_KEY_RSA = 1,
    LATCHKEY_KEY_EC = 2,
    LATCHKEY_KEY_OTHER = 3,      // another algorithm: refused without decoding
    LATCHKEY_KEY_NOT_FOUND = 0,  // not the structure asked for
};

static inline int latchkey_key_algorithm(const ASN1_OBJECT *oid) {
    switch (OBJ_obj2nid(oid)) {
    case NID_rsaEncryption: return LATCHKEY_KEY_RSA;
    case NID_X9_62_id_ecPublicKey: return LATCHKEY_KEY_EC;
    default: return LATCHKEY_KEY_OTHER;
    }
}

// The algorithm of a PKCS#8 PrivateKeyInfo, read without decoding its key.
static inline int latchkey_pkcs8_algorithm(const PKCS8_PRIV_KEY_INFO *p8) {
    const ASN1_OBJECT *oid = NULL;
    if (p8 == NULL || !PKCS8_pkey_get0(&oid, NULL, NULL, NULL, p8) || oid == NULL) return LATCHKEY_KEY_OTHER;
    return latchkey_key_algorithm(oid);
}

// The algorithm of `der` when it is exactly a PrivateKeyInfo (`is_private` 1) or a SubjectPublicKeyInfo
// (`is_private` 0): only the AlgorithmIdentifier is decoded (d2i_X509_PUBKEY would decode the key too).
// LATCHKEY_KEY_NOT_FOUND when `der` is not that structure.
static inline int latchkey_key_der_algorithm(const unsigned char *der, long length, int is_private) {
    const unsigned char *cursor = der;
    long content = 0;
    int tag = 0, xclass = 0;
    int header = ASN1_get_object(&cursor, &content, &tag, &xclass, length);
    if ((header & 0x80) || !(header & V_ASN1_CONSTRUCTED) || tag != V_ASN1_SEQUENCE || xclass != V_ASN1_UNIVERSAL
        || cursor + content != der + length) {
        ERR_clear_error();
        return LATCHKEY_KEY_NOT_FOUND;
    }
    const unsigned char *end = cursor + content;
    if (is_private) {
        // version INTEGER first
        const unsigned char *version = cursor;
        long size = 0;
        header = ASN1_get_object(&version, &size, &tag, &xclass, end - cursor);
        if ((header & 0x80) || tag != V_ASN1_INTEGER || xclass != V_ASN1_UNIVERSAL) {
            ERR_clear_error();
            return LATCHKEY_KEY_NOT_FOUND;
        }
        cursor = version + size;
    }
    X509_ALGOR *alg = d2i_X509_ALGOR(NULL, &cursor, end - cursor);
    if (alg == NULL) {
        ERR_clear_error();
        return LATCHKEY_KEY_NOT_FOUND;
    }
    int found = latchkey_key_algorithm(alg->algorithm);
    X509_ALGOR_free(alg);
    // Then the key: an OCTET STRING (PrivateKeyInfo) or a BIT STRING (SubjectPublicKeyInfo).
    const unsigned char *key = cursor;
    long size = 0;
    header = ASN1_get_object(&key, &size, &tag, &xclass, end - cursor);
    ERR_clear_error();
    if ((header & 0x80) || xclass != V_ASN1_UNIVERSAL || tag != (is_private ? V_ASN1_OCTET_STRING : V_ASN1_BIT_STRING))
        return LATCHKEY_KEY_NOT_FOUND;
    if (!is_private && key + size != end) return LATCHKEY_KEY_NOT_FOUND;
    return found;
}

// How opening an EncryptedPrivateKeyInfo ended.
enum {
    LATCHKEY_PKCS8_OPENED = 0,
    LATCHKEY_PKCS8_NOT_FOUND = 1,    // not an EncryptedPrivateKeyInfo
    LATCHKEY_PKCS8_UNDECRYPTED = 2,  // does not decrypt: a wrong passphrase, or a cipher not available
    LATCHKEY_PKCS8_REFUSED = 3,      // the derivation asks for too much work: `*work` says why
    LATCHKEY_PKCS8_OTHER_KEY = 4,    // decrypted, but neither RSA nor EC: not decoded
    LATCHKEY_PKCS8_BAD_KEY = 5,      // decrypted, RSA or EC, but does not decode
};

// Decrypts `der`, an EncryptedPrivateKeyInfo, with `pass` of `passlen` bytes (as OpenSSL's decoder
// does: `pass` non-NULL), charging its one derivation first (at most `max_iterations` and `max_work`),
// and decodes the key when it is RSA or EC. The decrypted PrivateKeyInfo is cleansed when freed.
static inline int latchkey_pkcs8_open(const unsigned char *der, long length, const char *pass, int passlen,
                                      long long max_iterations, long long max_work, latchkey_p12_work *work,
                                      EVP_PKEY **pkey) {
    *pkey = NULL;
    memset(work, 0, sizeof(*work));
    const unsigned char *cursor = der;
    X509_SIG *sig = d2i_X509_SIG(NULL, &cursor, length);
    if (sig == NULL || cursor != der + length) {
        X509_SIG_free(sig);
        ERR_clear_error();
        return LATCHKEY_PKCS8_NOT_FOUND;
    }
    const X509_ALGOR *alg = NULL;
    X509_SIG_get0(sig, &alg, NULL);
    latchkey_p12_cost cost = latchkey_p12_algorithm_cost(alg, &work->refusal);
    if (work->refusal == 0) latchkey_p12_add(work, cost);
    if (work->refusal != 0 || cost.iterations > max_iterations || cost.work > max_work) {
        X509_SIG_free(sig);
        return LATCHKEY_PKCS8_REFUSED;
    }
    PKCS8_PRIV_KEY_INFO *p8 = PKCS8_decrypt(sig, pass, passlen);
    X509_SIG_free(sig);
    int outcome = LATCHKEY_PKCS8_UNDECRYPTED;
    if (p8 != NULL) {
        int algorithm = latchkey_pkcs8_algorithm(p8);
        if (algorithm == LATCHKEY_KEY_OTHER) {
            outcome = LATCHKEY_PKCS8_OTHER_KEY;
        } else {
            *pkey = EVP_PKCS82PKEY(p8);
            outcome = *pkey != NULL ? LATCHKEY_PKCS8_OPENED : LATCHKEY_PKCS8_BAD_KEY;
        }
        PKCS8_PRIV_KEY_INFO_free(p8);
    }
    ERR_clear_error();
    return outcome;
}
