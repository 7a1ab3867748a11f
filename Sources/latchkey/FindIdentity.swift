import ArgumentParser
import Foundation
import Latchkey

/// `latchkey find-identity`: the identities (certificate + private key) in the keychain, listed as
/// macOS `security find-identity` lists them.
struct FindIdentity: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-identity",
        abstract: "List the identities: certificates whose private key is in the keychain.",
        discussion: """
            An identity is a certificate together with the private key of its public key; the \
            keychain forms one whenever both are stored. Each is listed on one line: a number, the \
            certificate's SHA-1 hash (what delete-certificate -Z takes), its subject summary in \
            quotes, and the private key's type and size. A certificate outside its validity period \
            is marked (expired) or (not yet valid). The count follows.

            latchkey has no trust settings or policies, so -v ("valid identities only") keeps the \
            identities whose certificate is within its validity period; macOS also evaluates trust.

            Reading the private keys' attributes needs their class: a locked keychain fails with \
            errSecInteractionNotAllowed (-25308). No identity is not an error.

            Examples:
              latchkey find-identity
              latchkey find-identity -v -c "Alice"
            """)

    @Flag(name: .customShort("v"), help: "Only identities whose certificate is within its validity period.")
    var validOnly = false

    @Option(
        name: .customShort("c"),
        help: ArgumentHelp(
            "Only identities whose certificate's subject summary or label contains this name.",
            valueName: "name"))
    var name: String?

    @OptionGroup
    var interaction: InteractionOptions

    func run() throws {
        interaction.apply()
        var lines: [String] = []
        var identities = try KeychainList.items(kSecClassIdentity, [:]).compactMap {
            item -> (StoredCertificate, [String: Any])? in
            guard let certificate = StoredCertificate(item: item) else { return nil }
            return (certificate, item)
        }
        if let name { identities = identities.filter { $0.0.matches(name: name) } }
        if validOnly { identities = identities.filter { $0.0.validityProblem == nil } }
        identities.sort { ($0.0.summary, hexString($0.0.sha1)) < ($1.0.summary, hexString($1.0.sha1)) }
        for (index, (certificate, item)) in identities.enumerated() {
            var line = "  \(index + 1)) \(hexString(certificate.sha1)) \(ItemPrinter.quoted(certificate.summary))"
            line += " (\(keyDescription(item)))"
            // An identity of a token (docs/TOKENS.md): which one.
            if let token = item[kSecAttrTokenID as String] as? String { line += " [token \(token)]" }
            if let problem = certificate.validityProblem { line += " (\(problem))" }
            lines.append(line)
        }
        let count = identities.count
        lines.append("     \(count) \(validOnly ? "valid " : "")identit\(count == 1 ? "y" : "ies") found")
        print(lines.joined(separator: "\n"))
    }

    /// "EC 256-bit" for the identity's private key. The identity's attributes are the key's overlaid by
    /// the certificate's, and a certificate has no key type or size, so these are the key's.
    private func keyDescription(_ item: [String: Any]) -> String {
        "\(KeyDescription.algorithm(item)) \(KeyDescription.bits(item))-bit"
    }
}
