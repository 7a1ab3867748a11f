import ArgumentParser
import Foundation
import Latchkey
import LatchkeyCrypto
import LatchkeySecrets

/// Turns the items `export` selected into one output: PEM blocks one after another, or the single
/// DER object, or one PKCS#12 file. Private keys are read through SecKeyCopyExternalRepresentation,
/// which the agent refuses for a key that is not extractable.
struct ExportEncoder {
    let format: FileFormat
    let passphrase: Passphrase

    /// The encoded objects, in order (private keys among them, hence wiping storage).
    private var objects: [(what: String, bytes: SecretBytes)] = []
    /// The identities, for PKCS#12 (encoded in `finish`, which needs exactly one).
    private var identities: [(certificate: StoredCertificate, key: SecKey, attributes: [String: Any])] = []
    /// How many of each kind, for the summary, in the order first seen.
    private var tally: [(kind: String, plural: String, count: Int)] = []

    /// True when the output holds a private key (it must then go to a file only its owner reads).
    private(set) var holdsSecret = false

    init(format: FileFormat, passphrase: Passphrase) {
        self.format = format
        self.passphrase = passphrase
    }

    /// The number of items added.
    var count: Int { tally.reduce(0) { $0 + $1.count } }

    /// "2 certificates, 1 private key".
    var summary: String {
        tally.map { "\($0.count) \($0.count == 1 ? $0.kind : $0.plural)" }.joined(separator: ", ")
    }

    mutating func add(certificate: StoredCertificate) {
        let what = "certificate \(ItemPrinter.quoted(certificate.summary))"
        objects.append((what, format == .pem ? text(certificate.pem) : SecretBytes(copying: certificate.der)))
        count("certificate")
    }

    /// A key item (its attributes and `kSecValueRef`).
    mutating func add(key item: [String: Any]) throws(ExitCode) {
        guard let key = item[kSecValueRef as String] as? SecKey else {
            throw fail("the keychain returned a key item without its key")
        }
        let attributes = KeychainList.attributesOnly(item)
        let what = describe(attributes)
        if KeyDescription.isPrivate(attributes) {
            objects.append((what, try privateKey(key, attributes, what: what)))
            count("private key")
        } else {
            objects.append((what, try publicKey(key, attributes, what: what)))
            count("public key")
        }
    }

    /// An identity item: its certificate and private key (PEM), or both into PKCS#12 in `finish`.
    mutating func add(identity item: [String: Any]) throws(ExitCode) {
        guard let identity = item[kSecValueRef as String] as? SecIdentity,
            let certificate = StoredCertificate(item: item)
        else {
            throw fail("the keychain returned an identity without its certificate")
        }
        var key: SecKey?
        guard SecIdentityCopyPrivateKey(identity, &key) == errSecSuccess, let key else {
            throw fail("the identity \(ItemPrinter.quoted(certificate.summary)) has no private key")
        }
        let attributes = KeychainList.attributesOnly(item)
        holdsSecret = true
        if format == .pkcs12 {
            identities.append((certificate, key, attributes))
        } else {
            objects.append(("certificate \(ItemPrinter.quoted(certificate.summary))", text(certificate.pem)))
            let what = "private key of \(ItemPrinter.quoted(certificate.summary))"
            objects.append((what, try privateKey(key, attributes, what: what)))
        }
        count("identity", plural: "identities")
    }

    /// The whole output.
    func finish(destination: String) throws(ExitCode) -> SecretBytes {
        switch format {
        case .pem:
            return concatenate(objects.map(\.bytes))
        case .der:
            guard objects.count == 1 else { throw ambiguous(objects.map(\.what), "DER holds one object") }
            return objects[0].bytes
        case .pkcs12:
            guard identities.count == 1 else {
                throw ambiguous(
                    identities.map { "identity \(ItemPrinter.quoted($0.certificate.summary))" },
                    "PKCS#12 holds one identity here")
            }
            return try pkcs12(identities[0], destination: destination)
        }
    }

    // MARK: Keys

    private mutating func privateKey(_ key: SecKey, _ attributes: [String: Any], what: String) throws(ExitCode)
        -> SecretBytes
    {
        holdsSecret = true
        try Interaction.checkKeyUse(attributes, what: what)
        var error: Unmanaged<CFError>?
        guard let data = SecKeyCopyExternalRepresentation(key, &error) else { throw exportFailure(what, error) }
        let bytes = SecretBytes(copying: UnsafeRawBufferPointer(start: data.bytes, count: data.length))
        let password =
            passphrase.isGiven
            ? try input { () throws(InputFailure) in try passphrase.toProtect("the private keys") } : nil
        do {
            let key = try AsymmetricKey(
                externalRepresentation: bytes, algorithm: algorithm(attributes), isPrivate: true)
            return format == .pem ? try key.pkcs8PEM(password: password) : try key.pkcs8DER(password: password)
        } catch {
            throw fail("cannot encode the \(what): \(error)")
        }
    }

    private func publicKey(_ key: SecKey, _ attributes: [String: Any], what: String) throws(ExitCode) -> SecretBytes {
        var error: Unmanaged<CFError>?
        guard let data = SecKeyCopyExternalRepresentation(key, &error) else { throw exportFailure(what, error) }
        do {
            let key = try AsymmetricKey(
                externalRepresentation: Array(data as Data), algorithm: algorithm(attributes), isPrivate: false)
            return format == .pem
                ? text(try key.subjectPublicKeyInfoPEM()) : SecretBytes(copying: try key.subjectPublicKeyInfoDER())
        } catch {
            throw fail("cannot encode the \(what): \(error)")
        }
    }

    // MARK: PKCS#12

    /// One identity with the issuer certificates the keychain holds, under a new passphrase.
    private func pkcs12(
        _ identity: (certificate: StoredCertificate, key: SecKey, attributes: [String: Any]), destination: String
    ) throws(ExitCode) -> SecretBytes {
        let what = "private key of \(ItemPrinter.quoted(identity.certificate.summary))"
        try Interaction.checkKeyUse(identity.attributes, what: what)
        var error: Unmanaged<CFError>?
        guard let data = SecKeyCopyExternalRepresentation(identity.key, &error) else {
            throw exportFailure(what, error)
        }
        let bytes = SecretBytes(copying: UnsafeRawBufferPointer(start: data.bytes, count: data.length))
        guard let leaf = identity.certificate.x509 else { throw fail("the identity's certificate cannot be read") }
        let others = try CertificateSearch.find().compactMap(\.x509)
        let chain = CertificateSearch.issuers(of: leaf, among: others)
        let password = try input { () throws(InputFailure) in try passphrase.toProtect(destination) }
        // Read from standard input or the terminal, it may hold one; OpenSSL would stop the passphrase there.
        guard !password.withUnsafeBytes({ $0.contains(0) }) else {
            throw fail("the passphrase contains a NUL byte, which a PKCS#12 passphrase cannot hold")
        }
        do {
            // An identity's attributes are its key's overlaid by its certificate's; the key type is the key's.
            let key = try AsymmetricKey(
                externalRepresentation: bytes, algorithm: algorithm(identity.attributes), isPrivate: true)
            var file = try PKCS12.make(
                key: key, certificate: leaf, chain: chain, password: password,
                name: identity.certificate.label ?? identity.certificate.summary)
            return SecretBytes(consuming: &file)
        } catch {
            throw fail("cannot make the PKCS#12 file: \(error)")
        }
    }

    // MARK: Helpers

    private mutating func count(_ kind: String, plural: String? = nil) {
        if let index = tally.firstIndex(where: { $0.kind == kind }) {
            tally[index].count += 1
        } else {
            tally.append((kind, plural ?? kind + "s", 1))
        }
    }

    private func describe(_ attributes: [String: Any]) -> String {
        var text = KeyDescription.of(attributes)
        if let label = attributes[kSecAttrLabel as String] as? String { text += " \(ItemPrinter.quoted(label))" }
        if let tag = attributes[kSecAttrApplicationTag as String] as? Data, !tag.isEmpty {
            text += " tag \(ItemPrinter.bytes(tag))"
        }
        return text
    }

    private func algorithm(_ attributes: [String: Any]) -> AsymmetricKey.Algorithm {
        KeyDescription.integer(attributes[kSecAttrKeyType as String]) == 42 ? .rsa : .ec
    }

    /// Text that holds no secret (a certificate or public key PEM) as output bytes.
    private func text(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }

    private func concatenate(_ parts: [SecretBytes]) -> SecretBytes {
        let total = SecretBytes(count: parts.reduce(0) { $0 + $1.count })
        var offset = 0
        total.withUnsafeMutableBytes { target in
            for part in parts {
                part.withUnsafeBytes { source in
                    UnsafeMutableRawBufferPointer(rebasing: target[offset..<(offset + source.count)]).copyMemory(
                        from: source)
                }
                offset += part.count
            }
        }
        return total
    }

    /// A failed SecKeyCopyExternalRepresentation (a key that is not extractable: errSecDataNotAvailable).
    private func exportFailure(_ what: String, _ error: Unmanaged<CFError>?) -> ExitCode {
        let nsError = error?.takeRetainedValue()
        let status = nsError.map { OSStatus($0.code) } ?? errSecInternalComponent
        let reason = LatchkeyDiagnostics.lastErrorDetail ?? nsError?.localizedDescription ?? "no detail"
        return failure("SecKeyCopyExternalRepresentation", status, detail: "\(what): \(reason)")
    }

    private func ambiguous(_ names: [String], _ rule: String) -> ExitCode {
        printError(
            "\(rule), and \(names.count) items match; narrow the query (-c, -l, --tag, --class) or use --format pem:")
        for name in names { printError("  \(name)") }
        return ExitCode(ExitStatus.failure)
    }

    private func fail(_ message: String) -> ExitCode { InputFailure(message).report() }

    private func input<T>(_ body: () throws(InputFailure) -> T) throws(ExitCode) -> T {
        do {
            return try body()
        } catch {
            throw error.report()
        }
    }
}
