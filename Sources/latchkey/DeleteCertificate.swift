import ArgumentParser
import Foundation
import Latchkey

/// `latchkey delete-certificate`: deletes one certificate, and with -t the private key of its
/// identity.
struct DeleteCertificate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-certificate",
        abstract: "Delete a certificate (with -t, also its private key).",
        discussion: """
            Deletes exactly one certificate: the one whose subject summary or label contains the \
            name given to -c (ignoring case), or whose SHA-1 hash is the one given to -Z (as \
            find-certificate -Z and find-identity print it). If -c matches several certificates, \
            nothing is deleted and their hashes are listed: use -Z.

            Without -t the certificate's private key, if the keychain holds it, stays (the \
            identity disappears with the certificate). With -t the identity is deleted: the \
            certificate and its private key, except a key that another certificate still uses.

            Exits with status 44 if no certificate matches.

            Examples:
              latchkey delete-certificate -c "Old Server"
              latchkey delete-certificate -Z 3F2A…E1 -t
            """)

    @Option(
        name: .customShort("c"),
        help: ArgumentHelp(
            "Delete the certificate whose subject summary or label contains this name.", valueName: "name"))
    var name: String?

    @Option(
        name: .customShort("Z"),
        help: ArgumentHelp("Delete the certificate with this SHA-1 hash (40 hexadecimal digits).", valueName: "hash"))
    var hash: String?

    @Flag(name: .customShort("t"), help: "Also delete the private key of the certificate's identity.")
    var withKey = false

    func validate() throws {
        guard (name == nil) != (hash == nil) else {
            throw ValidationError("give exactly one of -c <name> and -Z <hash>")
        }
        if let hash, CertificateSearch.parseSHA1(hash) == nil {
            throw ValidationError("-Z takes a SHA-1 hash: 40 hexadecimal digits")
        }
    }

    @OptionGroup
    var interaction: InteractionOptions

    func run() throws {
        interaction.apply()
        let target = try findOne()
        let title = ItemPrinter.quoted(target.summary)
        let keyQuery: [String: Any] = [
            kSecClass as String: kSecClassKey,
            kSecAttrApplicationLabel as String: target.attributes[kSecAttrPublicKeyHash as String] ?? Data(),
            kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
            kSecAttrSynchronizable as String: kSecAttrSynchronizableAny,
        ]
        // Whether the keychain holds the certificate's private key. Reading it needs its class key;
        // only -t depends on the answer, so without -t a locked key just goes unmentioned.
        let keyStatus = SecItemCopyMatching(keyQuery as CFDictionary, nil)
        guard withKey, keyStatus == errSecSuccess else {
            if withKey && keyStatus != errSecItemNotFound { throw secItemFailure("SecItemCopyMatching", keyStatus) }
            let status = SecItemDelete([kSecValuePersistentRef: target.persistentRef] as NSDictionary)
            guard status == errSecSuccess else { throw secItemFailure("SecItemDelete", status) }
            print("deleted certificate \(title)")
            if keyStatus == errSecSuccess {
                print("its private key stays in the keychain (-t deletes it too)")
            } else if withKey {
                print("the keychain holds no private key for it")
            }
            return
        }
        // The identity: its persistent reference names the certificate, and deleting it deletes the
        // key too unless another certificate still forms an identity with it.
        let identities = try KeychainList.items(kSecClassIdentity, [:]).compactMap(StoredCertificate.init(item:))
        guard let identity = identities.first(where: { $0.der == target.der }) else {
            throw failure(
                "SecItemCopyMatching", errSecItemNotFound, detail: "the identity of certificate \(title) is gone")
        }
        let status = SecItemDelete([kSecValuePersistentRef: identity.persistentRef] as NSDictionary)
        guard status == errSecSuccess else { throw secItemFailure("SecItemDelete", status) }
        if SecItemCopyMatching(keyQuery as CFDictionary, nil) == errSecSuccess {
            print("deleted certificate \(title); its private key is kept: another certificate uses it")
        } else {
            print("deleted certificate \(title) and its private key")
        }
    }

    /// The one certificate -c or -Z names.
    private func findOne() throws(ExitCode) -> StoredCertificate {
        if let hash, let digest = CertificateSearch.parseSHA1(hash) {
            guard let match = try CertificateSearch.find().first(where: { $0.sha1 == digest }) else {
                throw failure(
                    "SecItemCopyMatching", errSecItemNotFound,
                    detail: "no certificate has SHA-1 hash \(hexString(digest))")
            }
            return match
        }
        let name = name ?? ""
        let matches = try CertificateSearch.find(name: name)
        guard let first = matches.first else {
            throw failure(
                "SecItemCopyMatching", errSecItemNotFound,
                detail: "no certificate's subject or label contains \"\(name)\"")
        }
        guard matches.count == 1 else {
            printError("\(matches.count) certificates match \"\(name)\"; nothing was deleted. Choose one with -Z:")
            for match in matches { printError("  \(hexString(match.sha1)) \(ItemPrinter.quoted(match.summary))") }
            throw ExitCode(ExitStatus.failure)
        }
        return first
    }
}
