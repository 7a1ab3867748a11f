internal import COpenSSL
import LatchkeySecrets

/// Decoding key files (PEM and DER) into RSA and EC keys only. OpenSSL's decoders for other key types do
/// work the file chooses before anything could refuse the key (its DSA decoder computes g^x mod p with
/// p uncapped: a 32768-bit key held `latchkey import` 8 s, and the cost is cubic), so no decoder but
/// RSA's and EC's ever runs: a PrivateKeyInfo's and a SubjectPublicKeyInfo's algorithm OID is read first
/// (key_algorithms.h), an EncryptedPrivateKeyInfo is decrypted here (its derivation charged as a PKCS#12
/// one) and its OID read before decoding, and the type-specific forms are asked of RSA and EC by name.
extension AsymmetricKey {
    static let onlyRSAAndEC = CryptoError.unsupported("only RSA and EC keys are supported")

    static func decode(der: SecretBytes, password: SecretBytes?) throws(CryptoError) -> OpaquePointer {
        var made: OpaquePointer?
        var failure: CryptoError?
        der.withUnsafeBytes { buffer in
            do throws(CryptoError) {
                made = try decodeRSAOrEC(buffer, password: password)
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
        return made!
    }

    static func decode(pem: SecretBytes, password: SecretBytes?) throws(CryptoError) -> OpaquePointer {
        guard let block = try PEM.blocks(in: pem).first(where: { pemKeyLabels.contains($0.label) }) else {
            throw CryptoError.invalidInput("the PEM data holds no key")
        }
        let isLegacyEncrypted = block.headers.contains { $0.name == "Proc-Type" && $0.value.contains("ENCRYPTED") }
        guard isLegacyEncrypted else { return try decode(der: block.der, password: password) }
        // OpenSSL decrypts the PEM text (one MD5 iteration, cheap enough to run once per type); asking
        // for RSA and then EC keeps every other decoder out (a PKCS#8 block of another type fails both).
        var made: OpaquePointer?
        block.text.withUnsafeBytes { buffer in
            made =
                (try? KeyCodec.decode(
                    buffer, inputType: "PEM", structure: nil, keyType: "RSA",
                    selection: Int32(OSSL_KEYMGMT_SELECT_ALL), password: password, allowTrailingBytes: true))
                ?? (try? KeyCodec.decode(
                    buffer, inputType: "PEM", structure: nil, keyType: "EC",
                    selection: Int32(OSSL_KEYMGMT_SELECT_ALL), password: password, allowTrailingBytes: true))
        }
        guard let made else { throw CryptoError.wrongPassword }
        return made
    }

    /// One RSA or EC key from `der`, whatever its structure; `.unsupported` for another type, undecoded.
    private static func decodeRSAOrEC(_ der: UnsafeRawBufferPointer, password: SecretBytes?) throws(CryptoError)
        -> OpaquePointer
    {
        guard let base = der.baseAddress, der.count > 0 else { throw CryptoError.invalidInput("empty key data") }
        let bytes = base.assumingMemoryBound(to: UInt8.self)
        let all = Int32(OSSL_KEYMGMT_SELECT_ALL)
        for isPrivate: Int32 in [1, 0] {
            let selection = isPrivate == 1 ? all : KeyCodec.publicSelection
            switch Int(latchkey_key_der_algorithm(bytes, der.count, isPrivate)) {
            case LATCHKEY_KEY_RSA:
                return try KeyCodec.decode(
                    der, inputType: "DER", structure: nil, keyType: "RSA", selection: selection, password: nil)
            case LATCHKEY_KEY_EC:
                return try KeyCodec.decode(
                    der, inputType: "DER", structure: nil, keyType: "EC", selection: selection, password: nil)
            case LATCHKEY_KEY_OTHER: throw onlyRSAAndEC
            default: continue
            }
        }
        let encrypted = isEncryptedPrivateKeyInfo(der)
        if encrypted, let opened = try openEncrypted(bytes, der.count, password: password) { return opened }
        // The type-specific forms: PKCS#1 RSAPrivateKey, SEC1 ECPrivateKey, and PKCS#1 RSAPublicKey, which
        // OpenSSL's "any structure" search does not try unless asked for by name.
        if let made =
            (try? KeyCodec.decode(der, inputType: "DER", structure: nil, keyType: "RSA", selection: all, password: nil))
            ?? (try? KeyCodec.decode(
                der, inputType: "DER", structure: nil, keyType: "EC", selection: all, password: nil))
            ?? (try? KeyCodec.decode(
                der, inputType: "DER", structure: "type-specific", keyType: "RSA",
                selection: KeyCodec.publicSelection, password: nil))
        {
            return made
        }
        throw encrypted
            ? CryptoError.wrongPassword : CryptoError.invalidInput("the data is not a key in a supported format")
    }

    /// An EncryptedPrivateKeyInfo decrypted with `password` (none: the empty one, as OpenSSL's decoder
    /// would) and its key decoded if it is RSA or EC; nil when `der` does not decode as one.
    private static func openEncrypted(_ der: UnsafePointer<UInt8>, _ count: Int, password: SecretBytes?)
        throws(CryptoError) -> OpaquePointer?
    {
        let pass = cStringCopy(password ?? SecretBytes(count: 0))
        var work = latchkey_p12_work()
        var pkey: OpaquePointer?
        let outcome = pass.withUnsafeBytes { buffer in
            latchkey_pkcs8_open(
                der, count, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), Int32(buffer.count - 1),
                PKCS12.maximumIterations, PKCS12.maximumWork, &work, &pkey)
        }
        switch Int(outcome) {
        case LATCHKEY_PKCS8_OPENED: return pkey
        case LATCHKEY_PKCS8_NOT_FOUND: return nil
        case LATCHKEY_PKCS8_REFUSED:
            throw CryptoError.unsupported(
                PKCS12.refusal(of: work) ?? "the key asks for more key-derivation work than is accepted")
        case LATCHKEY_PKCS8_OTHER_KEY: throw onlyRSAAndEC
        case LATCHKEY_PKCS8_BAD_KEY: throw CryptoError.invalidInput("the encrypted key decrypts but does not decode")
        default: throw CryptoError.wrongPassword
        }
    }
}
