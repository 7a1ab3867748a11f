import LatchkeySecrets

/// Runs code that throws untyped errors (the older LatchkeyCrypto files) inside typed-throws code.
func withCryptoErrors<T>(_ body: () throws -> T) throws(CryptoError) -> T {
    do {
        return try body()
    } catch let error as CryptoError {
        throw error
    } catch {
        throw CryptoError.openssl("unexpected error: \(error)")
    }
}

/// A NUL-terminated copy of a password in wiping storage, for OpenSSL calls that take `char *`.
func cStringCopy(_ password: SecretBytes) -> SecretBytes {
    let copy = SecretBytes(count: password.count + 1)
    copy.withUnsafeMutableBytes { out in
        password.withUnsafeBytes { input in
            for k in 0..<input.count { out[k] = input[k] }
        }
        out[password.count] = 0
    }
    return copy
}

extension SecretBytes {
    /// A new `SecretBytes` holding the first `count` bytes of this one.
    func prefix(_ count: Int) -> SecretBytes {
        precondition(count <= self.count)
        let out = SecretBytes(count: count)
        out.withUnsafeMutableBytes { destination in
            withUnsafeBytes { source in
                for k in 0..<count { destination[k] = source[k] }
            }
        }
        return out
    }
}

extension SecretBytes {
    /// `withUnsafeBytes` for a closure with typed throws (the original rethrows untyped errors).
    func withUnsafeBytesTyped<R>(_ body: (UnsafeRawBufferPointer) throws(CryptoError) -> R) throws(CryptoError) -> R {
        var result: R?
        var failure: CryptoError?
        withUnsafeBytes { buffer in
            do throws(CryptoError) { result = try body(buffer) } catch { failure = error }
        }
        if let failure { throw failure }
        return result!
    }
}
