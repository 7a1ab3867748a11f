internal import COpenSSL
import LatchkeySecrets

/// The standard key files the command-line tool imports and exports: PKCS#8 (plain or encrypted),
/// SubjectPublicKeyInfo, and the traditional PKCS#1 RSA and SEC1 EC files, as DER or PEM.
extension AsymmetricKey {
    /// PEM labels that hold a key; other blocks (certificates, `EC PARAMETERS`) are skipped.
    package static let pemKeyLabels: Set<String> = [
        "PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "PUBLIC KEY", "RSA PUBLIC KEY",
    ]

    /// A key from DER: PKCS#8 `PrivateKeyInfo`, `EncryptedPrivateKeyInfo` (needs `password`),
    /// `SubjectPublicKeyInfo`, PKCS#1 `RSAPrivateKey`/`RSAPublicKey` or SEC1 `ECPrivateKey`.
    /// Throws `.wrongPassword` when an encrypted key does not open, `.invalidInput` for anything
    /// else that does not decode, `.unsupported` for keys other than RSA and P-256/384/521 (other types
    /// are refused by their algorithm OID, undecoded: `+Decoding`), or an encrypted key asking for more
    /// key-derivation work than a PKCS#12 file may.
    package convenience init(der: SecretBytes, password: SecretBytes? = nil) throws(CryptoError) {
        try self.init(adopting: Self.decode(der: der, password: password))
    }

    /// A key from PEM text: the first block whose label is in `pemKeyLabels`. Legacy encrypted PEM
    /// (`Proc-Type: 4,ENCRYPTED`) is decrypted by OpenSSL with `password`.
    package convenience init(pem: SecretBytes, password: SecretBytes? = nil) throws(CryptoError) {
        try self.init(adopting: Self.decode(pem: pem, password: password))
    }

    /// PKCS#8 `PrivateKeyInfo` DER of a private key; with a password, `EncryptedPrivateKeyInfo`
    /// (PBES2: PBKDF2-HMAC-SHA256 and AES-256-CBC, OpenSSL 3's default).
    package func pkcs8DER(password: SecretBytes? = nil) throws(CryptoError) -> SecretBytes {
        guard isPrivate else { throw CryptoError.invalidInput("only a private key has a PKCS#8 form") }
        return try KeyCodec.encode(
            pkey, selection: KeyCodec.keyPairSelection, outputType: "DER", structure: "PrivateKeyInfo",
            cipher: password == nil ? nil : "AES-256-CBC", password: password)
    }

    /// `pkcs8DER(password:)` as PEM (`PRIVATE KEY` or `ENCRYPTED PRIVATE KEY`), in wiping storage.
    package func pkcs8PEM(password: SecretBytes? = nil) throws(CryptoError) -> SecretBytes {
        let der = try pkcs8DER(password: password)
        return PEM.encode(secret: der, label: password == nil ? "PRIVATE KEY" : "ENCRYPTED PRIVATE KEY")
    }

    /// The public key as `SubjectPublicKeyInfo` DER (what a certificate embeds).
    package func subjectPublicKeyInfoDER() throws(CryptoError) -> [UInt8] {
        try KeyCodec.encode(
            pkey, selection: KeyCodec.publicSelection, outputType: "DER",
            structure: "SubjectPublicKeyInfo"
        ).unsafeCopyToArray()
    }

    /// `subjectPublicKeyInfoDER()` as a `PUBLIC KEY` PEM block.
    package func subjectPublicKeyInfoPEM() throws(CryptoError) -> String {
        PEM.encode(try subjectPublicKeyInfoDER(), label: "PUBLIC KEY")
    }

    /// True if `der` has the shape of an `EncryptedPrivateKeyInfo`: a SEQUENCE of exactly an
    /// AlgorithmIdentifier SEQUENCE and an OCTET STRING. Only tags and lengths are looked at.
    static func isEncryptedPrivateKeyInfo(_ der: UnsafeRawBufferPointer) -> Bool {
        /// (tag, content start, content end) of the element at `index`, or nil.
        func element(at index: Int, end: Int) -> (UInt8, Int, Int)? {
            guard index + 2 <= end else { return nil }
            let tag = der[index]
            var length = Int(der[index + 1])
            var start = index + 2
            if length >= 0x80 {
                let count = length & 0x7F
                guard count >= 1, count <= 4, start + count <= end else { return nil }
                length = 0
                for k in 0..<count { length = length << 8 | Int(der[start + k]) }
                start += count
            }
            guard start + length <= end else { return nil }
            return (tag, start, start + length)
        }
        guard let outer = element(at: 0, end: der.count), outer.0 == DER.sequence, outer.2 == der.count,
            let first = element(at: outer.1, end: outer.2), first.0 == DER.sequence,
            let second = element(at: first.2, end: outer.2), second.0 == DER.octetString
        else { return false }
        return second.2 == outer.2
    }
}
