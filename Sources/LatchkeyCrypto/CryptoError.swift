/// Errors from the cryptographic primitives.
///
/// Messages name the operation and the library's reason only; no key, password or plaintext byte
/// ever reaches an error string, because errors end up in logs and on the wire.
public enum CryptoError: Error, Equatable {
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
}
