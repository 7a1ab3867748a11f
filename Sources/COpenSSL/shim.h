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
