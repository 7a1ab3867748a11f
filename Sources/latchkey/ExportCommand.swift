import ArgumentParser
import Foundation
import Latchkey
import LatchkeySecrets

/// What `export --type` selects.
enum ExportType: String, ExpressibleByArgument, CaseIterable {
    case certificates, keys, identities, all
}

/// `latchkey export`: certificates, keys and identities from the keychain into standard files.
struct ExportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export certificates, keys or identities as PEM, DER or PKCS#12.",
        discussion: """
            Exports every item of the chosen type that matches the given attributes: certificates \
            as X.509 ("CERTIFICATE"), public keys as SubjectPublicKeyInfo ("PUBLIC KEY"), private \
            keys as PKCS#8 ("PRIVATE KEY"), identities as their certificate and private key, or \
            with --format pkcs12 as one PKCS#12 file that also holds the issuer certificates found \
            in the keychain. --type all (the default) exports certificates and keys. PEM holds any \
            number of items; DER and PKCS#12 exactly one, so narrow the query until one matches.

            A private key leaves the keychain only if it is extractable: a key imported or \
            generated with --non-extractable fails with errSecDataNotAvailable (-25316) and \
            nothing is written. With a passphrase (--passphrase-stdin or -P) private keys are \
            written encrypted ("ENCRYPTED PRIVATE KEY", PKCS#8 with PBKDF2 and AES-256-CBC). A \
            PKCS#12 file always has a passphrase: given, or asked twice on the terminal; it is \
            encrypted with AES-256-CBC and a SHA-256 MAC (OpenSSL 3's defaults).

            Output goes to standard output, or to the file named by -o. A file that receives a \
            private key is created with mode 0600 (an existing one is truncated and set to 0600 \
            first). Binary output (DER, PKCS#12) is not written to a terminal.

            -c matches certificates and identities whose subject summary or label contains the \
            name; -l matches labels; --tag, --class, --size and --key-type match keys (and the keys \
            of identities), so with them --type all exports keys only. Exits with status 44 if \
            nothing matches.

            Examples:
              latchkey export --type certificates -c "Example CA" -o example-ca.pem
              latchkey export --type keys --class public --tag com.example.signing
              latchkey export --type identities -c alice -o alice.p12
              printf '%s\\n' "$PW" | latchkey export --type identities -c alice --format pkcs12 \\
                --passphrase-stdin -o alice.p12
            """)

    @Option(name: .customLong("type"), help: ArgumentHelp("What to export.", valueName: "type"))
    var type: ExportType = .all

    @Option(
        name: .customLong("format"),
        help: ArgumentHelp("Output format (default: pkcs12 for identities, else pem).", valueName: "format"))
    var format: FileFormat?

    @Option(
        name: [.customShort("o"), .customLong("output")],
        help: ArgumentHelp("Write to this file instead of standard output.", valueName: "file"))
    var output: String?

    @Option(
        name: .customShort("c"),
        help: ArgumentHelp(
            "Match certificates and identities whose subject summary or label contains this name.",
            valueName: "name"))
    var name: String?

    @OptionGroup(title: "Match")
    var filters: KeyFilterOptions

    @Option(
        name: .customLong("key-type"), help: ArgumentHelp("Match the key type (kSecAttrKeyType).", valueName: "type"))
    var keyType: KeyAlgorithmArgument?

    @OptionGroup(title: "Passphrase")
    var passphrase: PassphraseOptions

    var effectiveFormat: FileFormat { format ?? (type == .identities ? .pkcs12 : .pem) }

    /// True when an option that only keys have was given.
    var hasKeyFilters: Bool { filters.hasKeyOnlyFilters || keyType != nil }

    func validate() throws {
        if effectiveFormat == .pkcs12 && type != .identities {
            throw ValidationError("PKCS#12 holds identities: use --type identities, or --format pem or der")
        }
        if type == .certificates && hasKeyFilters {
            throw ValidationError("--tag, --class, --size and --key-type match keys; certificates have none")
        }
        if type == .keys && name != nil {
            throw ValidationError("-c matches certificates and identities by subject; keys have none (use -l or --tag)")
        }
        if type == .identities && effectiveFormat == .der {
            throw ValidationError(
                "DER holds one object and an identity is two (certificate and key): use pem or pkcs12")
        }
        if type == .identities && filters.keyClass == .public {
            throw ValidationError("an identity's key is private; --class public matches none")
        }
    }

    @OptionGroup
    var interaction: InteractionOptions

    func run() throws {
        interaction.apply()
        let passphrase = Passphrase(passphrase)
        var encoder = ExportEncoder(format: effectiveFormat, passphrase: passphrase)
        var keyFilters = filters.keyFilters(type: keyType)
        switch type {
        case .certificates, .all:
            if !hasKeyFilters {
                let labelFilter: [String: Any] = filters.label.map { [kSecAttrLabel as String: $0] } ?? [:]
                for certificate in try CertificateSearch.find(labelFilter, name: name) {
                    encoder.add(certificate: certificate)
                }
            }
            // Keys have no subject: -c selects certificates only.
            if type == .all && name == nil {
                for item in try KeychainList.items(kSecClassKey, keyFilters) { try encoder.add(key: item) }
            }
        case .keys:
            for item in try KeychainList.items(kSecClassKey, keyFilters) { try encoder.add(key: item) }
        case .identities:
            keyFilters[kSecAttrKeyClass as String] = nil
            var identities = try KeychainList.items(kSecClassIdentity, keyFilters)
            if let name { identities = identities.filter { StoredCertificate(item: $0)?.matches(name: name) ?? false } }
            for item in identities { try encoder.add(identity: item) }
        }
        guard encoder.count > 0 else {
            throw failure("SecItemCopyMatching", errSecItemNotFound, detail: "nothing to export matches")
        }
        let bytes = try encoder.finish(destination: output ?? "standard output")
        do throws(InputFailure) {
            try OutputFile.write(bytes, to: output, secret: encoder.holdsSecret, binary: effectiveFormat != .pem)
        } catch {
            throw error.report()
        }
        if let output { print("exported \(encoder.summary) to \(output)") }
    }
}
