import ArgumentParser
import Foundation
import Latchkey

/// `latchkey find-key`: keys in the keychain, by their attributes. Never prints key bytes.
struct FindKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-key",
        abstract: "Find keys and print their attributes.",
        discussion: """
            Prints the first key that matches all the given attributes (every one with -a): its \
            attributes, one per line, as "name"<type>=value, as find-generic-password prints them. \
            Among them: "klbl", the application label (SHA-1 of the public key, which a matching \
            certificate has as "pkhh"); "kcls" 0 public, 1 private; "type" 42 RSA, 73 EC; "bsiz" \
            the size in bits; "atag" the application tag; "extr" 0 when the key may not be \
            exported. The key itself is never printed: use export.

            Exits with status 44 if no key matches. Reading a key of a locked class fails with \
            errSecInteractionNotAllowed (-25308): run 'latchkey unlock'.

            Examples:
              latchkey find-key -a
              latchkey find-key --tag com.example.signing --class private
              latchkey find-key --type rsa --size 2048 -a
            """)

    @OptionGroup(title: "Match")
    var filters: KeyFilterOptions

    @Option(name: .customLong("type"), help: ArgumentHelp("Match the key type (kSecAttrKeyType).", valueName: "type"))
    var type: KeyAlgorithmArgument?

    @Flag(name: .customShort("a"), help: "Print every matching key, not only the first.")
    var all = false

    @OptionGroup
    var interaction: InteractionOptions

    func run() throws {
        interaction.apply()
        var query = ItemQuery.make(kSecClassKey, filters.keyFilters(type: type))
        query[kSecMatchLimit as String] = all ? kSecMatchLimitAll : kSecMatchLimitOne
        query[kSecReturnAttributes as String] = kCFBooleanTrue
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess else { throw secItemFailure("SecItemCopyMatching", status) }
        let items: [[String: Any]]
        if let array = result as? NSArray {
            items = array.compactMap(ItemPrinter.dictionary)
        } else {
            items = ItemPrinter.dictionary(result).map { [$0] } ?? []
        }
        let rendered = items.map { ItemPrinter.render(itemClass: kSecClassKey as String, attributes: $0, secret: nil) }
        print(rendered.joined(separator: "\n"), terminator: "")
    }
}
