import ArgumentParser
import Foundation
import Latchkey
import LatchkeyCrypto
import LatchkeySecrets

/// The formats `import` and `export` take.
enum FileFormat: String, ExpressibleByArgument, CaseIterable {
    case pem, der, pkcs12
}

/// One thing found in a file to import, as the object SecItemAdd takes.
enum ImportItem {
    /// A certificate on its own.
    case certificate(SecCertificate)
    /// A certificate of a PKCS#12 file's chain: one already in the keychain is skipped, not an error
    /// (a CA certificate is often in several files).
    case chainCertificate(SecCertificate)
    /// A public or private key; `kind` says which in words ("EC 256-bit private key").
    case key(SecKey, kind: String)
    /// A PKCS#12 identity, with its friendly name if the file gave one.
    case identity(SecIdentity, label: String?, keyKind: String)

    var isKey: Bool {
        switch self {
        case .key, .identity: true
        case .certificate, .chainCertificate: false
        }
    }
}

/// Reads a file for `import`: PEM (any number of certificates and keys), DER (one certificate or
/// key), or PKCS#12 through `SecPKCS12Import`. Every failure is reported on standard error and
/// thrown as the exit code.
struct ImportDecoder {
    /// The file, as the user named it (for messages).
    let path: String
    let passphrase: Passphrase

    func decode(_ data: SecretBytes, format: FileFormat?) throws(ExitCode) -> [ImportItem] {
        switch format {
        case .pem?:
            guard PEM.looksLikePEM(data) else { throw fail("\(path) is not PEM (it has no -----BEGIN line)") }
            return try pem(data)
        case .der?:
            guard let items = try der(data) else { throw fail("\(path) is not a DER certificate or key") }
            return items
        case .pkcs12?:
            return try pkcs12(data, probing: false)!
        case nil:
            if PEM.looksLikePEM(data) { return try pem(data) }
            let lowered = path.lowercased()
            if lowered.hasSuffix(".p12") || lowered.hasSuffix(".pfx") { return try pkcs12(data, probing: false)! }
            if let items = try der(data) { return items }
            if let items = try pkcs12(data, probing: true) { return items }
            throw fail("\(path) is not a certificate, key or PKCS#12 file (PEM, DER or PKCS#12 expected)")
        }
    }

    // MARK: PEM

    /// Every certificate and key block, in file order. `EC PARAMETERS` blocks (which
    /// `openssl ecparam -genkey` writes before the key) are skipped silently, other blocks with a note.
    private func pem(_ data: SecretBytes) throws(ExitCode) -> [ImportItem] {
        let blocks: [PEMBlock]
        do {
            blocks = try PEM.blocks(in: data)
        } catch {
            throw fail("\(path) is not valid PEM: \(reason(error))")
        }
        var items: [ImportItem] = []
        var keysSeen = 0
        for (index, block) in blocks.enumerated() {
            let name = "\(path), PEM block \(index + 1) (\(block.label))"
            switch block.label {
            case "CERTIFICATE", "X509 CERTIFICATE":
                guard let certificate = SecCertificateCreateWithData(nil, Data(block.publicBytes()) as CFData) else {
                    throw fail("\(name) is not a valid X.509 certificate")
                }
                items.append(.certificate(certificate))
            case _ where AsymmetricKey.pemKeyLabels.contains(block.label):
                let key = try pemKey(block, name: name, firstKey: keysSeen == 0, file: data)
                keysSeen += 1
                items.append(try item(for: key, name: name))
            case "EC PARAMETERS":
                continue
            default:
                printError("note: skipped \(name): not a certificate or key")
            }
        }
        guard !items.isEmpty else { throw fail("\(path) holds no certificate or key") }
        return items
    }

    /// The key of a PEM block, asking for the passphrase when it is encrypted.
    private func pemKey(_ block: PEMBlock, name: String, firstKey: Bool, file: SecretBytes) throws(ExitCode)
        -> AsymmetricKey
    {
        // OpenSSL's traditional encryption (Proc-Type: 4,ENCRYPTED) is decrypted from the PEM text,
        // and LatchkeyCrypto reads the first key block of a text; PKCS#8 encryption has no such limit.
        let legacy = block.headers.contains { $0.name == "Proc-Type" && $0.value.contains("ENCRYPTED") }
        guard !legacy || firstKey else {
            throw fail(
                "\(name): only the first key of a PEM file may use traditional encryption (Proc-Type); "
                    + "convert it with 'openssl pkey' or split the file")
        }
        return try openKey(name: name) { password throws(CryptoError) in
            legacy
                ? try AsymmetricKey(pem: file, password: password)
                : try AsymmetricKey(der: block.der, password: password)
        }
    }

    // MARK: DER

    /// One DER certificate or key; nil when the data is neither.
    private func der(_ data: SecretBytes) throws(ExitCode) -> [ImportItem]? {
        let copy = data.dataCopy()
        defer { copy.wipe() }
        if let certificate = SecCertificateCreateWithData(nil, copy) { return [.certificate(certificate)] }
        let name = "\(path) (DER)"
        let key: AsymmetricKey
        do {
            key = try AsymmetricKey(der: data, password: nil)
        } catch .wrongPassword {
            key = try openKey(name: name) { password throws(CryptoError) in
                try AsymmetricKey(der: data, password: password)
            }
        } catch .unsupported(let why) {
            throw fail("\(name): \(why)")
        } catch {
            return nil
        }
        return [try item(for: key, name: name)]
    }

    /// Runs `open` without a passphrase, then, if the key is encrypted, with the user's.
    private func openKey(name: String, _ open: (SecretBytes?) throws(CryptoError) -> AsymmetricKey) throws(ExitCode)
        -> AsymmetricKey
    {
        do {
            return try open(nil)
        } catch .wrongPassword {
            let password = try input { () throws(InputFailure) in try passphrase.toOpen(path) }
            do {
                return try open(password)
            } catch .wrongPassword {
                throw fail("\(name): the passphrase is wrong")
            } catch {
                throw fail("\(name) is not a usable key: \(reason(error))")
            }
        } catch {
            throw fail("\(name) is not a usable key: \(reason(error))")
        }
    }

    /// A decoded key as the SecKey that SecItemAdd takes (SecKeyCreateWithData of its external
    /// representation).
    private func item(for key: AsymmetricKey, name: String) throws(ExitCode) -> ImportItem {
        let bytes: SecretBytes
        do {
            bytes = try key.externalRepresentation()
        } catch {
            throw fail("\(name) could not be converted: \(reason(error))")
        }
        let data = bytes.dataCopy()
        defer { data.wipe() }
        let attributes: NSDictionary = [
            kSecAttrKeyType: key.algorithm == .rsa ? kSecAttrKeyTypeRSA : kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeyClass: key.isPrivate ? kSecAttrKeyClassPrivate : kSecAttrKeyClassPublic,
        ]
        var error: Unmanaged<CFError>?
        guard let secKey = SecKeyCreateWithData(data, attributes, &error) else {
            throw keyFailure("SecKeyCreateWithData", error)
        }
        let kind =
            "\(key.algorithm == .rsa ? "RSA" : "EC") \(key.sizeInBits)-bit \(key.isPrivate ? "private" : "public") key"
        return .key(secKey, kind: kind)
    }

    // MARK: PKCS#12

    /// The identities and certificates of a PKCS#12 file, through SecPKCS12Import. A file without a
    /// passphrase opens without asking; otherwise the passphrase is asked for. When `probing` (the
    /// format was not given), data that is not PKCS#12 gives nil instead of an error; otherwise the
    /// result is never nil.
    private func pkcs12(_ data: SecretBytes, probing: Bool) throws(ExitCode) -> [ImportItem]? {
        let file = data.dataCopy()
        defer { file.wipe() }
        var result: CFArray?
        func attempt(_ password: SecretBytes) throws(ExitCode) -> OSStatus {
            // Read from standard input or the terminal, it may hold one; SecPKCS12Import would say errSecParam.
            guard !password.withUnsafeBytes({ $0.contains(0) }) else {
                throw fail("\(path): the passphrase contains a NUL byte, which a PKCS#12 passphrase cannot hold")
            }
            // kSecImportExportPassphrase as CFData (a latchkey extension) so it can be wiped after.
            let bytes = password.dataCopy()
            defer { bytes.wipe() }
            return SecPKCS12Import(file, [kSecImportExportPassphrase: bytes] as NSDictionary, &result)
        }
        var status: OSStatus
        if passphrase.isGiven {
            status = try attempt(try input { () throws(InputFailure) in try passphrase.toOpen(path) })
        } else {
            status = try attempt(SecretBytes(count: 0))
            if status == errSecAuthFailed {
                status = try attempt(try input { () throws(InputFailure) in try passphrase.toOpen(path) })
            }
        }
        if probing && status == errSecDecode { return nil }
        guard status == errSecSuccess else {
            throw failure("SecPKCS12Import", status, detail: LatchkeyDiagnostics.lastErrorDetail)
        }
        var items: [ImportItem] = []
        let entries = (result ?? NSArray()).compactMap { $0 as? NSDictionary }
        let hasIdentity = entries.contains { $0[kSecImportItemIdentity as String] != nil }
        for entry in entries {
            let chain = ((entry[kSecImportItemCertChain as String] as? NSArray) ?? NSArray()).compactMap {
                $0 as? SecCertificate
            }
            if let identity = entry[kSecImportItemIdentity as String] as? SecIdentity {
                var key: SecKey?
                _ = SecIdentityCopyPrivateKey(identity, &key)
                // The public half's attributes: those of the private key would carry its bytes.
                let attributes =
                    key.flatMap(SecKeyCopyPublicKey).flatMap(SecKeyCopyAttributes).flatMap(ItemPrinter.dictionary)
                    ?? [:]
                let keyKind =
                    "\(KeyDescription.algorithm(attributes)) \(KeyDescription.bits(attributes))-bit private key"
                items.append(
                    .identity(identity, label: entry[kSecImportItemLabel as String] as? String, keyKind: keyKind))
                items += chain.dropFirst().map { .chainCertificate($0) }
            } else {
                // Certificates outside every chain: the file's content when it has no identity.
                items += chain.map { hasIdentity ? ImportItem.chainCertificate($0) : ImportItem.certificate($0) }
            }
        }
        guard !items.isEmpty else { throw fail("\(path) is a PKCS#12 file with no certificate in it") }
        return items
    }

    // MARK: Helpers

    private func fail(_ message: String) -> ExitCode {
        InputFailure(message).report()
    }

    private func input<T>(_ body: () throws(InputFailure) -> T) throws(ExitCode) -> T {
        do {
            return try body()
        } catch {
            throw error.report()
        }
    }

    /// A crypto error in words, without the enum's decoration.
    private func reason(_ error: CryptoError) -> String {
        switch error {
        case .invalidInput(let why), .unsupported(let why), .openssl(let why): why
        case .wrongPassword: "the passphrase is wrong"
        default: "\(error)"
        }
    }
}
