internal import COpenSSL
import LatchkeySecrets

/// The hash functions Apple's SecKey algorithms name (SHA-1 and the SHA-2 family).
package enum DigestAlgorithm: Sendable, CaseIterable {
    case sha1, sha224, sha256, sha384, sha512

    /// Output length in bytes.
    package var size: Int {
        switch self {
        case .sha1: 20
        case .sha224: 28
        case .sha256: 32
        case .sha384: 48
        case .sha512: 64
        }
    }

    /// The digest of `data`.
    package func hash(_ data: [UInt8]) throws(CryptoError) -> [UInt8] {
        let md = try self.md()
        var out = [UInt8](repeating: 0, count: size)
        var written: UInt32 = 0
        let ok = data.withUnsafeBytes { input in EVP_Digest(input.baseAddress, input.count, &out, &written, md, nil) }
        guard ok == 1, Int(written) == size else { throw opensslError("digest") }
        return out
    }

    /// The fetched `EVP_MD`.
    func md() throws(CryptoError) -> OpaquePointer {
        let algorithms = AsymmetricAlgorithms.shared
        switch self {
        case .sha1: return try fetched(OpenSSLAlgorithms.shared.sha1, "SHA-1")
        case .sha224: return try fetched(algorithms.sha224, "SHA-224")
        case .sha256: return try fetched(OpenSSLAlgorithms.shared.sha256, "SHA-256")
        case .sha384: return try fetched(algorithms.sha384, "SHA-384")
        case .sha512: return try fetched(algorithms.sha512, "SHA-512")
        }
    }

    /// The OpenSSL digest name, as a static C string for `OSSL_PARAM`.
    var parameterName: UnsafeMutablePointer<CChar> {
        switch self {
        case .sha1: staticCString("SHA1")
        case .sha224: staticCString("SHA224")
        case .sha256: staticCString("SHA256")
        case .sha384: staticCString("SHA384")
        case .sha512: staticCString("SHA512")
        }
    }
}

/// Algorithm objects for the asymmetric code, fetched once per process for the same reasons as
/// `OpenSSLAlgorithms` (which holds the ones the keybag uses).
final class AsymmetricAlgorithms: @unchecked Sendable {
    static let shared = AsymmetricAlgorithms()

    let sha224: OpaquePointer?
    let sha384: OpaquePointer?
    let sha512: OpaquePointer?
    let aes128gcm: OpaquePointer?
    let x963kdf: OpaquePointer?

    private init() {
        sha224 = EVP_MD_fetch(nil, "SHA224", nil)
        sha384 = EVP_MD_fetch(nil, "SHA384", nil)
        sha512 = EVP_MD_fetch(nil, "SHA512", nil)
        aes128gcm = EVP_CIPHER_fetch(nil, "AES-128-GCM", nil)
        x963kdf = EVP_KDF_fetch(nil, "X963KDF", nil)
        ERR_clear_error()
    }
}

/// The fetched object, or `.openssl` naming the algorithm the providers lack.
func fetched(_ algorithm: OpaquePointer?, _ name: String) throws(CryptoError) -> OpaquePointer {
    guard let algorithm else { throw CryptoError.openssl("\(name) is not available from the OpenSSL providers") }
    return algorithm
}
