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

#include "pkcs12_work.h"
#include "key_algorithms.h"
#include "pkcs12_open.h"
