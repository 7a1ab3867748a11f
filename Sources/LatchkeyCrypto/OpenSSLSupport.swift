internal import COpenSSL

/// Algorithm objects fetched once per process.
///
/// OpenSSL 3 fetches are comparatively expensive (provider lookup, locking, refcounting), and the
/// HMAC path runs once per indexed attribute, so each algorithm is fetched exactly once. Fetched
/// `EVP_CIPHER`/`EVP_MAC`/`EVP_KDF`/`EVP_MD` objects are immutable and documented as safe to share
/// between threads; every operation creates its own context. The objects are never freed because
/// they live as long as the process. `static let` initialisation is itself thread-safe (swift_once).
final class OpenSSLAlgorithms: @unchecked Sendable {
    static let shared = OpenSSLAlgorithms()

    let aes256gcm: OpaquePointer?
    let hmac: OpaquePointer?
    let hkdf: OpaquePointer?
    let sha256: OpaquePointer?
    let sha1: OpaquePointer?

    private init() {
        aes256gcm = EVP_CIPHER_fetch(nil, "AES-256-GCM", nil)
        hmac = EVP_MAC_fetch(nil, "HMAC", nil)
        hkdf = EVP_KDF_fetch(nil, "HKDF", nil)
        sha256 = EVP_MD_fetch(nil, "SHA256", nil)
        sha1 = EVP_MD_fetch(nil, "SHA1", nil)
        // A failed fetch leaves an entry on this thread's error queue; the callers report the
        // missing algorithm themselves, so drop it rather than let it confuse a later error.
        ERR_clear_error()
    }

    /// The fetched object, or a `CryptoError.openssl` naming the algorithm that is unavailable.
    static func require(_ algorithm: OpaquePointer?, _ name: String) throws -> OpaquePointer {
        guard let algorithm else { throw CryptoError.openssl("\(name) is not available from the OpenSSL providers") }
        return algorithm
    }
}

/// Builds a `CryptoError.openssl` from this thread's OpenSSL error queue and clears the queue, so a
/// stale entry never gets attributed to a later, unrelated failure. OpenSSL's reason strings name
/// the failing function and reason only; they never contain key or data bytes.
func opensslError(_ operation: String) -> CryptoError {
    let code = ERR_get_error()
    var reason = "unknown error"
    if code != 0 {
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        reason = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
    ERR_clear_error()
    return .openssl("\(operation) failed: \(reason)")
}

/// A pointer to a NUL-terminated static string, for `OSSL_PARAM` keys and values.
///
/// `OSSL_PARAM` stores the pointers it is given, so a temporary from Swift's implicit
/// String-to-pointer bridging would dangle before OpenSSL reads it; literals live forever.
func staticCString(_ string: StaticString) -> UnsafeMutablePointer<CChar> {
    precondition(string.hasPointerRepresentation, "OSSL_PARAM names must be multi-character literals")
    return UnsafeMutableRawPointer(mutating: string.utf8Start).assumingMemoryBound(to: CChar.self)
}

/// `OSSL_PARAM` array selecting SHA-256, shared by HKDF and HMAC.
func sha256DigestParams() -> [OSSL_PARAM] {
    [
        OSSL_PARAM_construct_utf8_string(staticCString("digest"), staticCString("SHA256"), 0),
        OSSL_PARAM_construct_end(),
    ]
}

/// Checks that a byte count fits the `int` length arguments of the EVP update calls.
func evpLength(_ count: Int, _ what: String) throws -> Int32 {
    guard count >= 0, count <= Int(Int32.max) else { throw CryptoError.invalidInput("\(what) is too large") }
    return Int32(count)
}
