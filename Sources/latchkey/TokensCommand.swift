import ArgumentParser
import Foundation
import Latchkey

/// `latchkey tokens`: the smart cards and other tokens present now, their ids and their items
/// (docs/TOKENS.md).
struct TokensCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tokens",
        abstract: "List the tokens present (smart cards, HSMs) with their ids and items.",
        discussion: """
            The agent reads the certificates and keys of the tokens that the system's PKCS#11 \
            configuration (p11-kit) and /etc/latchkey/tokens.conf name, and shows them as keychain \
            items of the access group com.apple.token, with kSecAttrTokenID set to the token's id \
            (module:serial). Each token is listed with its id, then one line per item: its class, its \
            kind and its label. A token whose objects are all hidden until its PIN is given, and \
            which has no certificate or public key, shows no items.

            Reading a token's items never asks for its PIN; using one of its private keys does.

            Examples:
              latchkey tokens
              latchkey find-key --token softhsm2:1a2b3c4d5e6f7081
            """)

    func run() throws {
        var byToken: [String: [String]] = [:]
        for (itemClass, name) in [(kSecClassCertificate, "certificate"), (kSecClassKey, "key")] {
            let items = try KeychainList.items(itemClass, [kSecAttrAccessGroup as String: kSecAttrAccessGroupToken])
            for item in items {
                guard let id = item[kSecAttrTokenID as String] as? String else { continue }
                let kind = name == "key" ? " (\(KeyDescription.of(item)))" : ""
                let label = (item[kSecAttrLabel as String] as? String).map { " " + ItemPrinter.quoted($0) } ?? ""
                byToken[id, default: []].append("    \(name)\(kind)\(label)")
            }
        }
        var lines: [String] = []
        for id in byToken.keys.sorted() {
            lines.append(id)
            lines += byToken[id]!.sorted()
        }
        lines.append("\(byToken.count) token\(byToken.count == 1 ? "" : "s") with items present")
        print(lines.joined(separator: "\n"))
    }
}
