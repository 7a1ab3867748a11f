import ArgumentParser
import Foundation
import Latchkey

/// `latchkey find-certificate`: certificates in the keychain, as macOS `security find-certificate`.
struct FindCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-certificate",
        abstract: "Find certificates and print them.",
        discussion: """
            Prints the first certificate that matches (every one with -a), sorted by subject \
            summary: its attributes, one per line, as "name"<type>=value (binary values such as the \
            normalised subject in hexadecimal). With -p only the certificate is printed, as PEM. \
            -Z prints its SHA-256 and SHA-1 hashes first, -m its email addresses. Several \
            certificates are separated by blank lines.

            -c matches certificates whose subject summary (usually the common name) or label \
            contains the name, ignoring case; -e those with the email address in their subject or \
            subjectAltName. Without either, every certificate matches. Certificates are readable \
            even while the keychain is locked (they default to the always class).

            Exits with status 44 if no certificate matches.

            Examples:
              latchkey find-certificate -a -Z
              latchkey find-certificate -c "Example CA" -p > example-ca.pem
              latchkey find-certificate -e alice@example.com -m
            """)

    @Option(
        name: .customShort("c"),
        help: ArgumentHelp("Match certificates whose subject summary or label contains this name.", valueName: "name"))
    var name: String?

    @Option(
        name: .customShort("e"),
        help: ArgumentHelp("Match certificates with this email address.", valueName: "email"))
    var email: String?

    @Flag(name: .customShort("a"), help: "Print every matching certificate, not only the first.")
    var all = false

    @Flag(name: .customShort("p"), help: "Print the certificate as PEM instead of its attributes.")
    var pem = false

    @Flag(name: .customShort("Z"), help: "Print the SHA-256 and SHA-1 hashes of the certificate.")
    var hashes = false

    @Flag(name: .customShort("m"), help: "Print the certificate's email addresses.")
    var showEmails = false

    @OptionGroup
    var interaction: InteractionOptions

    func run() throws {
        interaction.apply()
        var found = try CertificateSearch.find(name: name, email: email)
        guard !found.isEmpty else { throw failure("SecItemCopyMatching", errSecItemNotFound, detail: nil) }
        if !all { found = [found[0]] }
        print(found.map(render).joined(separator: "\n"), terminator: "")
    }

    func render(_ certificate: StoredCertificate) -> String {
        var text = ""
        if hashes {
            text += "SHA-256 hash: \(hexString(certificate.sha256))\n"
            text += "SHA-1 hash: \(hexString(certificate.sha1))\n"
        }
        if showEmails {
            text += "email addresses: \(certificate.emails.joined(separator: ", "))\n"
        }
        if pem {
            text += certificate.pem
        } else {
            text += ItemPrinter.render(
                itemClass: kSecClassCertificate as String, attributes: certificate.attributes, secret: nil)
        }
        return text
    }
}
