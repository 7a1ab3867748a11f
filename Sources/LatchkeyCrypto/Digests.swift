internal import COpenSSL

/// SHA-256 (FIPS 180-4).
package enum SHA256 {
    /// The 32-byte SHA-256 digest of `data`.
    package static func hash(_ data: [UInt8]) -> [UInt8] {
        digest(data, OpenSSLAlgorithms.shared.sha256, name: "SHA-256", size: 32)
    }
}

/// SHA-1, only for identifiers that Apple's API defines with it (the public-key hash behind
/// `kSecAttrApplicationLabel`); never for anything that needs collision resistance.
package enum SHA1 {
    /// The 20-byte SHA-1 digest of `data`.
    package static func hash(_ data: [UInt8]) -> [UInt8] {
        digest(data, OpenSSLAlgorithms.shared.sha1, name: "SHA-1", size: 20)
    }
}

/// One-shot digest. These APIs do not throw: a digest can only fail if libcrypto itself is broken
/// (algorithm missing from the default provider, allocation failure), and then nothing else works
/// either, so the process stops rather than returning a wrong hash.
private func digest(_ data: [UInt8], _ md: OpaquePointer?, name: String, size: Int) -> [UInt8] {
    guard let md else { fatalError("\(name) is not available from the OpenSSL providers") }
    var out = [UInt8](repeating: 0, count: size)
    var written: UInt32 = 0
    let ok = data.withUnsafeBytes { input in
        EVP_Digest(input.baseAddress, input.count, &out, &written, md, nil)
    }
    guard ok == 1, Int(written) == size else { fatalError("\(name) digest failed inside libcrypto") }
    return out
}
