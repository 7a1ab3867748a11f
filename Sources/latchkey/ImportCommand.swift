import ArgumentParser
import Foundation
import Latchkey
import LatchkeySecrets

/// `latchkey import`: certificates, keys and PKCS#12 identities from a file into the keychain
/// ("Import, Then Add": the file is read here, then each object is added with SecItemAdd).
struct ImportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import certificates, keys and identities from a PEM, DER or PKCS#12 file.",
        discussion: """
            PEM files may hold any number of certificates ("CERTIFICATE") and keys: PKCS#8 \
            ("PRIVATE KEY", "ENCRYPTED PRIVATE KEY"), traditional RSA and EC private keys ("RSA \
            PRIVATE KEY", "EC PRIVATE KEY", also with Proc-Type encryption) and public keys \
            ("PUBLIC KEY", "RSA PUBLIC KEY"). A DER file holds one certificate or key, recognised \
            by its content. A PKCS#12 file (.p12, .pfx) is read with SecPKCS12Import: its identity \
            (certificate and private key) is added, then the other certificates of its chain. \
            Without --format the format is recognised from the content (and the .p12/.pfx name).

            Keys are RSA or EC on P-256, P-384 or P-521. A certificate and its private key form an \
            identity in the keychain (see find-identity), whether they come from one file or two.

            Each added item is reported on its own line. An item that is already in the keychain \
            is reported as errSecDuplicateItem (-25299) and the others are still added; the exit \
            status is then 1. Certificates of a PKCS#12 chain that are already present are skipped \
            with a note.

            Encrypted keys and PKCS#12 files need a passphrase: from --passphrase-stdin, from -P \
            (readable by other users in /proc and ps(1): avoid), or asked on the terminal. A \
            PKCS#12 file without a passphrase opens without asking.

            Certificates default to the always class (readable while the keychain is locked), keys \
            to when-unlocked; --accessible sets the class of everything imported.

            Examples:
              latchkey import server.pem
              latchkey import alice.p12 --label "Alice (mail)"
              printf '%s\\n' "$P12_PASSWORD" | latchkey import alice.p12 --passphrase-stdin
              latchkey import signing-key.pem --tag com.example.signing --non-extractable
            """)

    @Argument(help: ArgumentHelp("The file to import.", valueName: "file"))
    var file: String

    @Option(
        name: .customLong("format"), help: ArgumentHelp("The file's format (default: recognised).", valueName: "format")
    )
    var format: FileFormat?

    @OptionGroup(title: "Passphrase")
    var passphrase: PassphraseOptions

    @Option(
        name: .customLong("accessible"),
        help: ArgumentHelp(
            "Accessibility class of the imported items (kSecAttrAccessible).",
            valueName: "class"))
    var accessible: Accessibility?

    @Option(
        name: [.customShort("l"), .customLong("label")],
        help: ArgumentHelp(
            "Label of the imported items (kSecAttrLabel); by default a certificate's label is its "
                + "subject summary, and a key has none.", valueName: "label"))
    var label: String?

    @Option(
        name: .customLong("tag"),
        help: ArgumentHelp(
            "Application tag of the imported keys (kSecAttrApplicationTag), given as text.", valueName: "tag"))
    var tag: String?

    @Flag(
        name: .customLong("non-extractable"),
        help: "Imported private keys can never be exported again (kSecAttrIsExtractable false).")
    var nonExtractable = false

    @Option(
        name: .customLong("access-control"),
        help: ArgumentHelp(
            "Using or exporting the imported private keys (and identities) needs the user present "
                + "(kSecAttrAccessControl); words as for add-generic-password.", valueName: "words"))
    var accessControl: String?

    func validate() throws {
        if let accessControl { _ = try AccessControlWords.parse(accessControl) }
    }

    func run() throws {
        let data: SecretBytes
        do throws(InputFailure) {
            data = try InputFile.read(file)
        } catch {
            throw error.report()
        }
        let items = try ImportDecoder(path: file, passphrase: Passphrase(passphrase)).decode(data, format: format)
        if (tag != nil || nonExtractable) && !items.contains(where: \.isKey) {
            throw InputFailure("--tag and --non-extractable apply to keys, and \(file) holds none").report()
        }
        if accessControl != nil && !items.contains(where: \.isKey) {
            throw InputFailure("--access-control applies to private keys, and \(file) holds none").report()
        }
        let control = try accessControl.map { words throws in
            try AccessControlWords.make(
                AccessControlWords.parse(words),
                protection: accessible?.pdmn ?? (kSecAttrAccessibleWhenUnlocked as String))
        }

        var duplicate: ExitCode?
        for item in items {
            switch try add(item, control: control) {
            case .added(let what): print("imported \(what)")
            case .skipped(let what): print("already in the keychain, skipped: \(what)")
            case .duplicate(let code): duplicate = code
            }
        }
        if let duplicate { throw duplicate }
    }

    enum Outcome {
        case added(String)
        case skipped(String)
        case duplicate(ExitCode)
    }

    /// Adds one item with the command's attributes. A duplicate is reported and returned; any other
    /// failure is thrown, ending the command (the items before it stay added, and were reported).
    func add(_ item: ImportItem, control: SecAccessControl?) throws(ExitCode) -> Outcome {
        var attributes: [String: Any] = [:]
        if let accessible { attributes[kSecAttrAccessible as String] = accessible.pdmn }
        let what: String
        switch item {
        case .certificate(let certificate), .chainCertificate(let certificate):
            attributes[kSecValueRef as String] = certificate
            if case .certificate = item, let label { attributes[kSecAttrLabel as String] = label }
            what = "certificate \(ItemPrinter.quoted(summary(certificate)))"
        case .key(let key, let kind):
            attributes[kSecValueRef as String] = key
            addKeyAttributes(&attributes, label: label)
            let keyAttributes = (SecKeyCopyAttributes(key) as? [String: Any]) ?? [:]
            if let control, KeyDescription.isPrivate(keyAttributes) {
                attributes[kSecAttrAccessControl as String] = control
            }
            what = kind
        case .identity(let identity, let fileLabel, let keyKind):
            attributes[kSecValueRef as String] = identity
            addKeyAttributes(&attributes, label: label ?? fileLabel)
            if let control { attributes[kSecAttrAccessControl as String] = control }
            var certificate: SecCertificate?
            _ = SecIdentityCopyCertificate(identity, &certificate)
            what = "identity \(ItemPrinter.quoted(certificate.map(summary) ?? "")) (certificate and \(keyKind))"
        }
        let status = SecItemAdd(attributes as CFDictionary, nil)
        switch status {
        case errSecSuccess:
            return .added(what)
        case errSecDuplicateItem:
            if case .chainCertificate = item { return .skipped(what) }
            return .duplicate(failure("SecItemAdd", status, detail: "\(what) is already in the keychain"))
        default:
            // Nothing sensible can follow a locked keychain or a missing agent.
            throw secItemFailure("SecItemAdd", status)
        }
    }

    private func addKeyAttributes(_ attributes: inout [String: Any], label: String?) {
        if let label { attributes[kSecAttrLabel as String] = label }
        if let tag { attributes[kSecAttrApplicationTag as String] = Data(tag.utf8) }
        if nonExtractable { attributes[kSecAttrIsExtractable as String] = kCFBooleanFalse }
    }

    private func summary(_ certificate: SecCertificate) -> String {
        SecCertificateCopySubjectSummary(certificate).map { $0 as String } ?? "(no subject)"
    }
}
