internal import COpenSSL
import LatchkeySecrets

/// PKCS#12 (`.p12`/`.pfx`) files through OpenSSL's PKCS12 API: reading what `SecPKCS12Import` reads
/// (a private key, its certificate and any further certificates) and writing an identity for export.
package enum PKCS12 {
    /// Largest PKCS#12 file accepted.
    package static let maximumSize = 16 << 20

    /// Most key-derivation iterations accepted for any one derivation (the MAC, an encrypted safe, a
    /// shrouded key). OpenSSL 3.0 accepts up to 2^31−1, so without a cap a 1 KB file holds a thread for
    /// minutes before its passphrase is even checked. Real files use 2048 (OpenSSL's default, PBKDF2-SHA256
    /// for AES-256 and a SHA-256 MAC, or with `-legacy` 3DES and SHA-1), 2000 (Windows' exports, 3DES or
    /// AES-256 with SHA-256), 10,000 (Java), up to 600,000; Windows refuses more than 600,000, BoringSSL
    /// more than 100,000,000. Ten million is 16 times Windows' limit.
    package static let maximumIterations: Int64 = 10_000_000
    /// Most work accepted for any one derivation, in units of one PBKDF2-HMAC-SHA256 iteration for one
    /// 32-byte block (shim.h): iterations × output blocks × the digest's weight (HMAC-SHA1 and -SHA256 1,
    /// -SHA384 and -SHA512 3; the PKCS#12 KDF 1 for each of its key and IV blocks). So the cap means what
    /// ten million iterations meant for PBKDF2-SHA256, which measured 3.0 s here (302 ns each, OpenSSL 3.0
    /// on a loaded 2-core x86-64 with SHA extensions); a file the count cap let through at 10 million
    /// with HMAC-SHA512/224 (refused now) cost 4.4 times that. The real files above cost at most
    /// 6,144 units per derivation (3DES: 2048 iterations × 3 SHA-1 blocks); 600,000 iterations of
    /// PBKDF2-SHA512, 1,800,000.
    package static let maximumWork: Int64 = 10_000_000
    /// Most work accepted for one import, every derivation it runs counted as it runs: the MAC once (an
    /// empty passphrase: once or twice, its absent form and then its empty one), each encrypted safe and
    /// the shrouded key once (without a MAC and with an empty passphrase, the walk that fails with the
    /// absent form as well). Enough for a MAC, the certificates and the key at the largest cost each
    /// (about 9 s of PBKDF2-SHA256 here); the work a file shows without its passphrase (the MAC, its
    /// encrypted safes and plain shrouded keys) is checked against it before anything is derived.
    package static let maximumTotalWork: Int64 = 3 * maximumWork
    /// Most encrypted safes and shrouded keys (and nested safes) accepted in one file: real files have
    /// one or two.
    package static let maximumEncryptedBags: Int32 = 64
    /// Most certificates accepted in one file: a chain has a handful, a Java truststore exported as
    /// PKCS#12 about 150. Each costs a parse in OpenSSL and another here.
    package static let maximumCertificates: Int32 = 1024

    /// What a PKCS#12 file held.
    package struct Contents: Sendable {
        /// The private key, if the file had one.
        package let key: AsymmetricKey?
        /// The certificate that matches the key (paired by key, as OpenSSL's PKCS12_parse pairs them), or
        /// the first certificate when there is no key.
        package let certificate: X509Certificate?
        /// All other certificates (a chain), in file order.
        package let additional: [X509Certificate]
        /// The friendly name of the certificate's bag, when the file gives one.
        package let friendlyName: String?
        /// How many key derivations opening the file ran (the MAC's, each encrypted safe's and the key's).
        package let derivations: Int
    }

    /// Opens a PKCS#12 file. Throws `.wrongPassword` when the MAC (or, in a file without a MAC opened
    /// with the empty passphrase, the decryption) fails with `password`, `.invalidInput` for data that is
    /// not PKCS#12, does not decode (before any decryption, in a file without a MAC) or does not decrypt
    /// although its MAC verifies, a key that does not decode or does not belong to its certificate, and
    /// a passphrase holding a NUL byte, and `.unsupported` for a cipher no OpenSSL provider can read, a
    /// file without a MAC opened with a passphrase (OpenSSL 3.0 cannot), too much key-derivation work (or
    /// a PRF or MAC digest other than SHA-1, SHA-256, SHA-384 and SHA-512), more than
    /// `maximumCertificates` certificates, or a key other than RSA or EC P-256/384/521 (refused by its
    /// algorithm before any decoder runs).
    ///
    /// PKCS#12's empty password has two forms, absent (no password bytes) and empty (the two zero bytes
    /// of an empty BMPString): `password` empty tries both, absent first, as OpenSSL does, in the MAC,
    /// or, in a file without one, in the decryption (OpenSSL 3.0's PKCS12_parse tries only the absent
    /// form there, and `openssl pkcs12 -export -passout pass:` writes the other).
    ///
    /// The MAC is verified once (for each form tried) and everything is then decrypted without
    /// OpenSSL's PKCS12_parse, which would verify it again (`latchkey_pkcs12_open`). Files from Apple's
    /// Keychain Access, older macOS and Windows encrypt with RC2-40 and 3DES; RC2 (and DES, RC4) OpenSSL 3
    /// keeps in its legacy provider, which is loaded into a library context of its own (`LegacyPKCS12`)
    /// and used only for the decryptions whose cipher the default context lacks: nothing else in the
    /// process ever sees RC2, DES or RC4, and keys are decoded in the default context.
    package static func parse(der: [UInt8], password: SecretBytes) throws(CryptoError) -> Contents {
        guard !der.isEmpty, der.count <= maximumSize else {
            throw CryptoError.invalidInput("PKCS#12 size out of range")
        }
        // OpenSSL's calls take it as a C string, which would end at the NUL.
        guard !password.withUnsafeBytes({ $0.contains(0) }) else { throw Self.passphraseWithNUL }
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

        try checkWork(p12)

        let pass = cStringCopy(password)
        var budget = latchkey_p12_budget()
        budget.max_iterations = maximumIterations
        budget.max_work = maximumWork
        budget.max_total = maximumTotalWork
        budget.caps = caps
        budget.legacy = LegacyPKCS12.context
        var pkey: OpaquePointer?, x509: OpaquePointer?, stack: OpaquePointer?
        defer {
            EVP_PKEY_free(pkey)
            X509_free(x509)
            if let stack { OPENSSL_sk_pop_free(stack, x509FreeCallback) }
        }
        let outcome = pass.withUnsafeBytes { buffer -> ParseOutcome in
            let text = UnsafePointer(buffer.baseAddress!.assumingMemoryBound(to: CChar.self))
            let length = Int32(password.count)
            // The forms to try, in order: an empty passphrase is absent (NULL) first, then empty.
            let forms: [UnsafePointer<CChar>?] = password.count == 0 ? [nil, text] : [text]
            func open(_ form: UnsafePointer<CChar>?) -> Int {
                Int(latchkey_pkcs12_open(p12, form, length, &budget, &pkey, &x509, &stack))
            }
            guard PKCS12_mac_present(p12) == 1 else {
                // OpenSSL 3.0 reads a file without a MAC only without a passphrase (with one, its
                // PKCS12_parse fails as for a wrong MAC); that stays so, and is not called a wrong passphrase.
                guard password.count == 0 else { return .noMAC }
                // Without a MAC only the decryption tells the forms apart; each walk's work is charged. A
                // walk that fails otherwise (a structure or certificate that does not decode) would fail
                // the same with the other form: the file is damaged, no passphrase would open it.
                for form in forms {
                    let opened = open(form)
                    if opened != LATCHKEY_P12_UNDECRYPTED { return ParseOutcome(opened, verified: false) }
                }
                return .wrongPassword
            }
            for form in forms {
                let verified = Int(latchkey_pkcs12_verify_mac(p12, form, length, &budget))
                if verified == LATCHKEY_P12_FAILED { continue }
                guard verified == LATCHKEY_P12_OPENED else { return ParseOutcome(verified, verified: false) }
                // The MAC verified: the passphrase is right, and the contents are not verified again.
                return ParseOutcome(open(form), verified: true)
            }
            return .wrongPassword
        }
        ERR_clear_error()
        switch outcome {
        case .parsed: break
        case .wrongPassword: throw CryptoError.wrongPassword
        case .unreadable:
            throw CryptoError.unsupported(
                "the PKCS#12 file is encrypted with a cipher that no OpenSSL provider here can read"
                    + (LegacyPKCS12.isAvailable ? "" : " (OpenSSL's legacy provider could not be loaded)"))
        case .damaged:
            throw CryptoError.invalidInput("the PKCS#12 file does not decrypt although its passphrase is right")
        case .malformed:
            throw CryptoError.invalidInput("the data is not a readable PKCS#12 file (a part of it does not decode)")
        case .otherKey:
            throw CryptoError.unsupported("only RSA and EC keys are supported")
        case .badKey:
            throw CryptoError.invalidInput("the PKCS#12 file's private key does not decode")
        case .noMAC:
            throw CryptoError.unsupported("PKCS#12 files without an integrity MAC are read only without a passphrase")
        case .tooMuchWork:
            throw CryptoError.unsupported(
                refusal(of: budget.work) ?? "the file asks for more key-derivation work than is accepted")
        }

        var key: AsymmetricKey?
        if let made = pkey {
            pkey = nil  // adopted: freed by the key from here on
            key = try AsymmetricKey(adopting: made)
        }
        // The walk paired the key with a certificate by their public parts; the key's private part must
        // belong to them too (after AsymmetricKey checked its type and size, which bound the check).
        if let key, x509 != nil { try checkPair(key) }
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
            // The walk copies the bag's friendlyName attribute into the certificate's alias, as PKCS12_parse.
            var length: Int32 = 0
            if let alias = X509_alias_get0(x509, &length), length > 0 {
                friendlyName = String(decoding: UnsafeBufferPointer(start: alias, count: Int(length)), as: UTF8.self)
            }
        } else if key == nil, !certificates.isEmpty {
            certificate = certificates.removeFirst()
        }
        return Contents(
            key: key, certificate: certificate, additional: certificates, friendlyName: friendlyName,
            derivations: Int(budget.derivations))
    }

    /// Throws `.invalidInput` unless `key`'s private part belongs to its public part: a signature made
    /// with it must verify. OpenSSL decodes an EC key's public point from the file as given (it computes
    /// it only when absent) and X509_check_private_key compares public parts only, so a key holding a
    /// certificate's point with another scalar would make an identity whose key cannot sign for it.
    /// One signature and one verification (an 8192-bit RSA key: about 40 ms) rather than
    /// EVP_PKEY_pairwise_check, which for RSA tests the primes too (4 s for 8192 bits).
    private static func checkPair(_ key: AsymmetricKey) throws(CryptoError) {
        let algorithm: SignatureAlgorithm =
            key.algorithm == .rsa ? .rsaSignatureDigestPKCS1v15SHA256 : .ecdsaSignatureDigestX962SHA256
        let digest = SHA256.hash(Array("latchkey PKCS#12 key check".utf8))
        let matches: Bool
        do {
            matches = try key.publicKey().verify(algorithm, digest, signature: key.sign(algorithm, digest))
        } catch {
            matches = false
        }
        guard matches else {
            throw CryptoError.invalidInput(
                "the PKCS#12 file's private key does not belong to its certificate (its parts do not match)")
        }
    }

    private static let passphraseWithNUL = CryptoError.invalidInput(
        "a PKCS#12 passphrase cannot contain a NUL byte (OpenSSL would read only what comes before it)")

    /// How an attempt to open a PKCS#12 file ended.
    private enum ParseOutcome {
        case parsed
        case wrongPassword
        /// A cipher (or MAC digest) no provider can read.
        case unreadable
        /// The MAC verified but the contents do not decrypt or decode.
        case damaged
        /// No MAC, and a passphrase, which OpenSSL cannot use together.
        case noMAC
        /// More key-derivation work than accepted, or a cap passed (the budget's refusal says which).
        case tooMuchWork
        /// Without a MAC: a structure or certificate that does not decode, before or after a decryption.
        case malformed
        /// A key other than RSA and EC, not decoded.
        case otherKey
        /// An RSA or EC key that does not decode.
        case badKey

        /// A step's or a walk's `LATCHKEY_P12_*` outcome; a failure after a verified MAC is damage.
        init(_ code: Int, verified: Bool) {
            switch code {
            case LATCHKEY_P12_OPENED: self = .parsed
            case LATCHKEY_P12_UNREADABLE: self = .unreadable
            case LATCHKEY_P12_REFUSED: self = .tooMuchWork
            case LATCHKEY_P12_OTHER_KEY: self = .otherKey
            case LATCHKEY_P12_BAD_KEY: self = .badKey
            case LATCHKEY_P12_FAILED: self = verified ? .damaged : .malformed
            default: self = verified ? .damaged : .wrongPassword
            }
        }
    }

    /// The bag and certificate caps, for the C walks.
    private static let caps = latchkey_p12_caps(bags: maximumEncryptedBags, certificates: maximumCertificates)

    /// Throws `.unsupported` when what `p12` shows without its passphrase (its MAC, encrypted safes and
    /// plain shrouded keys, each once, and the certificates of its plain safes) already asks for more
    /// key-derivation work than accepted or passes a cap, before anything is derived.
    private static func checkWork(_ p12: OpaquePointer) throws(CryptoError) {
        var shown = latchkey_p12_work()
        if latchkey_pkcs12_check(p12, caps, &shown) == 0, let refusal = refusal(of: shown) {
            throw CryptoError.unsupported(refusal)
        }
    }

    /// Why `work` is refused (scrypt, too many bags or certificates, a malformed count, a PRF or digest
    /// not accepted, more iterations or work than accepted in one derivation or in all), or nil.
    static func refusal(of work: latchkey_p12_work) -> String? {
        switch Int(work.refusal) {
        case LATCHKEY_P12_UNSUPPORTED_KDF:
            return "the file derives a key with a function other than PBKDF2 (such as scrypt), which is not accepted"
        case LATCHKEY_P12_TOO_MANY_BAGS:
            return "the file has more than \(maximumEncryptedBags) encrypted safes and keys, or nests them too deep"
        case LATCHKEY_P12_MALFORMED:
            return "the file gives a key-derivation iteration count that is not a positive integer"
        case LATCHKEY_P12_UNSUPPORTED_DIGEST:
            return
                "the file derives a key or its MAC with a digest other than SHA-1, SHA-256, SHA-384 or SHA-512, which is not accepted"
        case LATCHKEY_P12_TOO_MANY_CERTIFICATES:
            return "the file has more than \(maximumCertificates) certificates"
        default: break
        }
        if work.iterations > maximumIterations {
            return
                "the file asks for \(work.iterations) key-derivation iterations; at most \(maximumIterations) are accepted"
        }
        if work.largest > maximumWork {
            return
                "one key derivation in the file asks for \(work.largest) units of work (iterations × output blocks × the digest's weight); at most \(maximumWork) are accepted"
        }
        if work.total > maximumTotalWork {
            return
                "the file asks for \(work.total) units of key-derivation work in all (iterations × output blocks × the digest's weight); at most \(maximumTotalWork) are accepted"
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
        // PKCS12_create takes it as a C string: the file would be protected by what comes before the NUL.
        guard !password.withUnsafeBytes({ $0.contains(0) }) else { throw Self.passphraseWithNUL }
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
/// legacy algorithm by accident; the context lives as long as the process. `latchkey_pkcs12_open` makes
/// it a thread's default context for one decryption whose cipher only it has, and only C code runs in
/// that time, so nothing else (such as the process's algorithm cache) can be fetched from it.
private enum LegacyPKCS12 {
    /// The context with the default and legacy providers, or nil when the legacy provider is missing.
    static var context: OpaquePointer? { loaded.pointer }

    static var isAvailable: Bool { context != nil }

    private static let loaded: Context = Context()

    private final class Context: @unchecked Sendable {
        let pointer: OpaquePointer?

        init() {
            guard let made = OSSL_LIB_CTX_new() else {
                pointer = nil
                return
            }
            // The default provider too: key derivation and digests come from there.
            guard OSSL_PROVIDER_load(made, "default") != nil, OSSL_PROVIDER_load(made, "legacy") != nil else {
                OSSL_LIB_CTX_free(made)
                ERR_clear_error()
                pointer = nil
                return
            }
            pointer = made
        }
    }
}

/// `X509_free` with the signature `OPENSSL_sk_pop_free` expects.
private func x509FreeCallback(_ pointer: UnsafeMutableRawPointer?) {
    X509_free(pointer.map { OpaquePointer($0) })
}
