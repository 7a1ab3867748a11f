internal import COpenSSL
import LatchkeySecrets

/// PKCS#12 (`.p12`/`.pfx`) files through OpenSSL's PKCS12 API: reading what `SecPKCS12Import` reads
/// (a private key, its certificate and any further certificates) and writing an identity for export.
package enum PKCS12 {
    /// Largest PKCS#12 file accepted.
    package static let maximumSize = 16 << 20

    /// Most key-derivation iterations accepted for any one derivation (the MAC, an encrypted safe, a
    /// shrouded key). OpenSSL 3.0 accepts up to 2^31−1 and derives the MAC several times per import, so
    /// without a cap a 1 KB file holds a thread for minutes before its passphrase is even checked. Real
    /// files use 2048 (OpenSSL's default), 2000 to 600,000 (macOS and Windows exports); Windows refuses
    /// more than 600,000, BoringSSL more than 100,000,000. Ten million is 16 times Windows' limit and
    /// costs well under a second per derivation.
    package static let maximumIterations: Int64 = 10_000_000
    /// Most iterations accepted for the whole file, all derivations together (once each): enough for a
    /// MAC, the certificates and the key at the largest count each.
    package static let maximumTotalIterations: Int64 = 3 * maximumIterations
    /// Most encrypted safes and shrouded keys (and nested safes) accepted in one file: real files have
    /// one or two.
    package static let maximumEncryptedBags: Int32 = 64

    /// What a PKCS#12 file held.
    package struct Contents: Sendable {
        /// The private key, if the file had one.
        package let key: AsymmetricKey?
        /// The certificate that matches the key (OpenSSL pairs them by localKeyID or by key), or the
        /// first certificate when there is no key.
        package let certificate: X509Certificate?
        /// All other certificates (a chain), in file order.
        package let additional: [X509Certificate]
        /// The friendly name of the certificate's bag, when the file gives one.
        package let friendlyName: String?
    }

    /// Opens a PKCS#12 file. Throws `.wrongPassword` when the MAC (or, in a file without a MAC opened
    /// without a passphrase, the decryption) fails with `password`, `.invalidInput` for data that is not
    /// PKCS#12 or does not decrypt although its MAC verifies, and `.unsupported` for a cipher no OpenSSL
    /// provider can read, a file without a MAC opened with a passphrase (OpenSSL 3.0 cannot), or a key
    /// other than RSA or EC P-256/384/521. An empty password also tries the absent password, as OpenSSL
    /// and Apple do.
    ///
    /// Files from Apple's Keychain Access, older macOS and Windows encrypt with RC2-40 and 3DES, which
    /// OpenSSL 3 keeps in its legacy provider. That provider is loaded into a library context of its own
    /// (`LegacyPKCS12`) and used only when the default algorithms cannot read a file, only for the
    /// decryption itself: nothing else in the process ever sees RC2, DES or RC4.
    package static func parse(der: [UInt8], password: SecretBytes) throws(CryptoError) -> Contents {
        guard !der.isEmpty, der.count <= maximumSize else {
            throw CryptoError.invalidInput("PKCS#12 size out of range")
        }
        let p12: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            let parsed = d2i_PKCS12(nil, &cursor, buffer.count)
            if let parsed, cursor.map({ $0 - buffer.baseAddress! }) != buffer.count {
                PKCS12_free(parsed)
                return nil
            }
            return parsed
        }
        ERR_clear_error()
        guard let p12 else { throw CryptoError.invalidInput("the data is not a PKCS#12 file") }
        defer { PKCS12_free(p12) }

        // The work the file asks for, from what is readable without its passphrase, before any derivation.
        try checkWork(p12, decrypt: false, pass: nil)

        let pass = cStringCopy(password)
        var pkey: OpaquePointer?, x509: OpaquePointer?, stack: OpaquePointer?
        defer {
            EVP_PKEY_free(pkey)
            X509_free(x509)
            if let stack { OPENSSL_sk_pop_free(stack, x509FreeCallback) }
        }
        // What a failed PKCS12_parse may have left (it frees the key and certificate itself, not always
        // the chain), so that a second attempt starts from nothing.
        func discard() {
            EVP_PKEY_free(pkey)
            X509_free(x509)
            if let stack { OPENSSL_sk_pop_free(stack, x509FreeCallback) }
            (pkey, x509, stack) = (nil, nil, nil)
        }
        let outcome = pass.withUnsafeBytes { buffer -> ParseOutcome in
            let text = buffer.baseAddress!.assumingMemoryBound(to: CChar.self)
            let hasMAC = PKCS12_mac_present(p12) == 1
            // The passphrase PKCS12_parse will use, tried in its order: an empty one as absent (NULL) first.
            var effective: UnsafePointer<CChar>? = text
            if hasMAC {
                if password.count == 0 && PKCS12_verify_mac(p12, nil, 0) == 1 {
                    effective = nil
                } else if PKCS12_verify_mac(p12, text, Int32(password.count)) != 1 {
                    return latchkey_openssl_unavailable_algorithm() == 1 ? .unreadable : .wrongPassword
                }
            } else if password.count == 0 {
                effective = nil
            }
            ERR_clear_error()
            // OpenSSL 3.0's PKCS12_parse reads a file without a MAC only without a passphrase; with one it
            // fails as for a wrong MAC, which must not be reported as a wrong passphrase.
            if !hasMAC && password.count > 0 { return .noMAC }
            // The shrouded keys inside the encrypted safes, which only the passphrase shows.
            if let refusal = workRefusal(p12, decrypt: true, pass: effective) { return .tooMuchWork(refusal) }
            if PKCS12_parse(p12, text, &pkey, &x509, &stack) == 1 { return .parsed(legacy: false) }
            discard()
            if latchkey_openssl_unavailable_algorithm() == 1 {
                guard LegacyPKCS12.isAvailable else { return .unreadable }
                // The safes the default context could not decrypt, looked into with the legacy ciphers.
                let inside = LegacyPKCS12.withContext { measure(p12, decrypt: true, pass: effective) }
                if let work = inside ?? nil, let refusal = refusal(of: work) { return .tooMuchWork(refusal) }
                if LegacyPKCS12.parse(p12, text, &pkey, &x509, &stack) { return .parsed(legacy: true) }
                discard()
                if latchkey_openssl_unavailable_algorithm() == 1 { return .unreadable }
            }
            ERR_clear_error()
            // With a MAC that verified, the passphrase is right: the file is damaged. Without one (and
            // without a passphrase), a failed decryption is all there is to tell a wrong passphrase by.
            return hasMAC ? .damaged : .wrongPassword
        }
        ERR_clear_error()
        let legacy: Bool
        switch outcome {
        case .parsed(let fromLegacy): legacy = fromLegacy
        case .wrongPassword: throw CryptoError.wrongPassword
        case .unreadable:
            throw CryptoError.unsupported(
                "the PKCS#12 file is encrypted with a cipher that no OpenSSL provider here can read"
                    + (LegacyPKCS12.isAvailable ? "" : " (OpenSSL's legacy provider could not be loaded)"))
        case .damaged:
            throw CryptoError.invalidInput("the PKCS#12 file does not decrypt although its passphrase is right")
        case .noMAC:
            throw CryptoError.unsupported("PKCS#12 files without an integrity MAC are read only without a passphrase")
        case .tooMuchWork(let why):
            throw CryptoError.unsupported(why)
        }

        var key: AsymmetricKey?
        if let made = pkey {
            pkey = nil  // adopted: freed by the key from here on
            let adopted = try AsymmetricKey(adopting: made)
            // A key decoded in the legacy context is re-made in the default one, so that nothing the
            // import returns depends on that context.
            key =
                legacy
                ? try AsymmetricKey(
                    externalRepresentation: adopted.externalRepresentation(), algorithm: adopted.algorithm,
                    isPrivate: adopted.isPrivate)
                : adopted
        }
        var certificates: [X509Certificate] = []
        if let stack {
            for index in 0..<max(0, OPENSSL_sk_num(stack)) {
                guard let raw = OPENSSL_sk_value(stack, index) else { continue }
                certificates.append(try certificate(from: OpaquePointer(raw)))
            }
        }
        var certificate: X509Certificate?
        var friendlyName: String?
        if let x509 {
            certificate = try Self.certificate(from: x509)
            // PKCS12_parse copies the bag's friendlyName attribute into the certificate's alias.
            var length: Int32 = 0
            if let alias = X509_alias_get0(x509, &length), length > 0 {
                friendlyName = String(decoding: UnsafeBufferPointer(start: alias, count: Int(length)), as: UTF8.self)
            }
        } else if key == nil, !certificates.isEmpty {
            certificate = certificates.removeFirst()
        }
        return Contents(key: key, certificate: certificate, additional: certificates, friendlyName: friendlyName)
    }

    /// How an attempt to open a PKCS#12 file ended.
    private enum ParseOutcome {
        case parsed(legacy: Bool)
        case wrongPassword
        /// A cipher (or MAC digest) no provider can read.
        case unreadable
        /// The MAC verified but the contents do not decrypt or decode.
        case damaged
        /// No MAC, and a passphrase, which OpenSSL cannot use together.
        case noMAC
        /// More key-derivation work than accepted, found inside an encrypted safe.
        case tooMuchWork(String)
    }

    /// Throws `.unsupported` when `p12` asks for more key-derivation work than accepted (see
    /// `workRefusal`).
    private static func checkWork(
        _ p12: OpaquePointer, decrypt: Bool, pass: UnsafePointer<CChar>?
    ) throws(CryptoError) {
        if let refusal = workRefusal(p12, decrypt: decrypt, pass: pass) { throw CryptoError.unsupported(refusal) }
    }

    /// Why `p12` is refused for the key-derivation work it asks for (the iteration counts of its MAC,
    /// encrypted safes and shrouded keys; how many of those; scrypt), or nil. Without `decrypt`, nothing
    /// is derived; with it, the encrypted safes are decrypted with `pass` to see the keys inside, which
    /// a walk without it must have accepted first.
    private static func workRefusal(_ p12: OpaquePointer, decrypt: Bool, pass: UnsafePointer<CChar>?) -> String? {
        measure(p12, decrypt: decrypt, pass: pass).flatMap(refusal(of:))
    }

    /// The walk behind `workRefusal`, OpenSSL calls only (it may run in the legacy context); nil when
    /// the authenticated safes do not decode, which PKCS12_parse fails on before deriving anything.
    private static func measure(
        _ p12: OpaquePointer, decrypt: Bool, pass: UnsafePointer<CChar>?
    ) -> latchkey_p12_work? {
        var work = latchkey_p12_work()
        return latchkey_pkcs12_check(p12, decrypt ? 1 : 0, pass, -1, maximumEncryptedBags, &work) == 0 ? work : nil
    }

    private static func refusal(of work: latchkey_p12_work) -> String? {
        switch Int(work.refusal) {
        case LATCHKEY_P12_UNSUPPORTED_KDF:
            return "the file derives a key with a function other than PBKDF2 (such as scrypt), which is not accepted"
        case LATCHKEY_P12_TOO_MANY_BAGS:
            return "the file has more than \(maximumEncryptedBags) encrypted safes and keys, or nests them too deep"
        case LATCHKEY_P12_MALFORMED:
            return "the file gives a key-derivation iteration count that is not a positive integer"
        default: break
        }
        if work.largest > maximumIterations {
            return
                "the file asks for \(work.largest) key-derivation iterations; at most \(maximumIterations) are accepted"
        }
        if work.total > maximumTotalIterations {
            return
                "the file asks for \(work.total) key-derivation iterations in all; at most \(maximumTotalIterations) are accepted"
        }
        return nil
    }

    /// A PKCS#12 file holding `key`, `certificate` and `chain`, protected by `password`, with
    /// OpenSSL 3's defaults: PBES2 (PBKDF2-HMAC-SHA256, AES-256-CBC) for key and certificates, a
    /// SHA-256 MAC, 2048 iterations. `name` becomes the friendly name (the label Apple shows).
    package static func make(
        key: AsymmetricKey, certificate: X509Certificate, chain: [X509Certificate] = [],
        password: SecretBytes, name: String? = nil
    ) throws(CryptoError) -> [UInt8] {
        guard key.isPrivate else { throw CryptoError.invalidInput("a PKCS#12 identity needs a private key") }
        guard certificate.publicKeyBytes == key.publicKeyBytes else {
            throw CryptoError.invalidInput("the certificate does not belong to the key")
        }
        let cert = try x509(certificate.der)
        defer { X509_free(cert) }
        guard let stack = OPENSSL_sk_new_null() else { throw opensslError("certificate stack") }
        defer { OPENSSL_sk_pop_free(stack, x509FreeCallback) }
        for member in chain {
            let x = try x509(member.der)
            guard OPENSSL_sk_push(stack, UnsafeRawPointer(x)) > 0 else {
                X509_free(x)
                throw opensslError("certificate stack")
            }
        }
        let pass = cStringCopy(password)
        let p12: OpaquePointer? = pass.withUnsafeBytes { buffer in
            let text = buffer.baseAddress!.assumingMemoryBound(to: CChar.self)
            // 0 for the algorithms and iteration counts selects OpenSSL's defaults.
            if let name {
                return name.withCString { PKCS12_create(text, $0, key.pkey, cert, stack, 0, 0, 0, 0, 0) }
            }
            return PKCS12_create(text, nil, key.pkey, cert, stack, 0, 0, 0, 0, 0)
        }
        guard let p12 else { throw opensslError("creating PKCS#12") }
        defer { PKCS12_free(p12) }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS12(p12, &out)
        guard length > 0, let out else { throw opensslError("encoding PKCS#12") }
        defer { CRYPTO_free(out, nil, 0) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    // MARK: Helpers

    private static func certificate(from x509: OpaquePointer) throws(CryptoError) -> X509Certificate {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(x509, &out)
        guard length > 0, let out else { throw opensslError("encoding a certificate") }
        defer { CRYPTO_free(out, nil, 0) }
        return try X509Certificate(der: Array(UnsafeBufferPointer(start: out, count: Int(length))))
    }

    private static func x509(_ der: [UInt8]) throws(CryptoError) -> OpaquePointer {
        let made: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let made else { throw opensslError("reading a certificate") }
        return made
    }
}

/// OpenSSL's legacy provider (RC2, DES, RC4, …) in a library context of its own, for reading PKCS#12
/// files and nothing else. The process's default context never loads it, so no other code can select a
/// legacy algorithm by accident; the context lives as long as the process.
private enum LegacyPKCS12 {
    /// The context with the default and legacy providers, or nil when the legacy provider is missing.
    private static let context: Context = Context()

    private final class Context: @unchecked Sendable {
        let pointer: OpaquePointer?

        init() {
            guard let made = OSSL_LIB_CTX_new() else {
                pointer = nil
                return
            }
            // The default provider too: key derivation, digests and key decoding come from there.
            guard OSSL_PROVIDER_load(made, "default") != nil, OSSL_PROVIDER_load(made, "legacy") != nil else {
                OSSL_LIB_CTX_free(made)
                ERR_clear_error()
                pointer = nil
                return
            }
            pointer = made
        }
    }

    static var isAvailable: Bool { context.pointer != nil }

    /// `body` with the legacy context as this thread's default library context, or nil without it. As
    /// for `parse`, `body` must only call OpenSSL.
    static func withContext<T>(_ body: () -> T) -> T? {
        guard let legacy = context.pointer, let previous = OSSL_LIB_CTX_set0_default(legacy) else { return nil }
        defer { _ = OSSL_LIB_CTX_set0_default(previous) }
        return body()
    }

    /// `PKCS12_parse` with the legacy context as this thread's default library context, for that call
    /// only (OpenSSL 3 keeps the default context per thread). No Swift code runs while it is in place, so
    /// nothing else (such as the process's algorithm cache) can be fetched from it.
    static func parse(
        _ p12: OpaquePointer, _ password: UnsafePointer<CChar>, _ pkey: inout OpaquePointer?,
        _ x509: inout OpaquePointer?, _ stack: inout OpaquePointer?
    ) -> Bool {
        guard let legacy = context.pointer, let previous = OSSL_LIB_CTX_set0_default(legacy) else { return false }
        let parsed = PKCS12_parse(p12, password, &pkey, &x509, &stack) == 1
        _ = OSSL_LIB_CTX_set0_default(previous)
        return parsed
    }
}

/// `X509_free` with the signature `OPENSSL_sk_pop_free` expects.
private func x509FreeCallback(_ pointer: UnsafeMutableRawPointer?) {
    X509_free(pointer.map { OpaquePointer($0) })
}
