/// Errors from the cryptographic primitives.
///
/// Messages name the operation and the library's reason only; no key, password or plaintext byte
/// ever reaches an error string, because errors end up in logs and on the wire.
package enum CryptoError: Error, Equatable {
    /// An AES-GCM tag did not verify, or the sealed box was too short to hold one. Deliberately
    /// says nothing more, so callers cannot act as a decryption oracle.
    case authenticationFailed
    /// A caller-supplied argument was out of range (wrong key or nonce length, bad parameters).
    case invalidInput(String)
    /// libcrypto reported a failure; the string is the operation plus OpenSSL's reason text.
    case openssl(String)
    /// libargon2 reported a failure (`code` is the library's negative error code).
    case argon2(code: Int32, message: String)
    /// The random number generator could not produce bytes.
    case randomFailure
    /// The key, algorithm or data format is valid but not supported here (an algorithm the key type
    /// cannot do, an elliptic curve other than P-256/P-384/P-521, a certificate key type other than
    /// RSA or EC). Apple's SecKey reports these as errSecUnimplemented or "algorithm not supported".
    case unsupported(String)
    /// Encrypted input (PKCS#12, encrypted PKCS#8, legacy encrypted PEM) did not open with the given
    /// password, or needs one and none was given. Kept apart from `invalidInput` so that a caller can
    /// ask again instead of reporting a damaged file.
    case wrongPassword
}
