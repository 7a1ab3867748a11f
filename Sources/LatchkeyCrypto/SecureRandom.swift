internal import COpenSSL
import LatchkeySecrets

/// Cryptographically secure random bytes from OpenSSL's DRBG (`RAND_bytes`), which is seeded from
/// the kernel and safe to call from several threads at once.
package enum SecureRandom {
    /// `count` random bytes in an ordinary array, for values that are not secret once used
    /// (salts, nonces, identifiers).
    package static func bytes(_ count: Int) throws -> [UInt8] {
        guard count >= 0, count <= Int(Int32.max) else {
            throw CryptoError.invalidInput("random byte count out of range")
        }
        var out = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return out }
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard ok == 1 else {
            ERR_clear_error()
            throw CryptoError.randomFailure
        }
        return out
    }

    /// `count` random bytes generated directly into wiping, locked storage, for keys.
    package static func secret(_ count: Int) throws -> SecretBytes {
        guard count >= 0, count <= Int(Int32.max) else {
            throw CryptoError.invalidInput("random byte count out of range")
        }
        let out = SecretBytes(count: count)
        guard count > 0 else { return out }
        let ok = out.withUnsafeMutableBytes { buffer in
            RAND_bytes(buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(count))
        }
        guard ok == 1 else {
            ERR_clear_error()
            throw CryptoError.randomFailure
        }
        return out
    }
}
