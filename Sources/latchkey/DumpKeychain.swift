import ArgumentParser
import Foundation
import Latchkey

/// `latchkey dump-keychain`: every generic and internet password.
struct DumpKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "dump-keychain",
        abstract: "Print every password item.",
        discussion: """
            Prints every generic and internet password item, synchronizable or not, in the format of \
            find-generic-password, separated by blank lines and sorted by service or server, then \
            account. Passwords are printed only with -d.

            Items of locked classes cannot be read. If some are locked, the items that can be read \
            are printed, the locked classes are named on standard error, and the exit status is 1 \
            (errSecInteractionNotAllowed, -25308). An empty keychain prints nothing.

            Examples:
              latchkey dump-keychain
              latchkey dump-keychain -d > secrets.txt   # contains every password in clear
            """)

    @Flag(name: .customShort("d"), help: "Also print each item's password (in clear).")
    var withPasswords = false

    /// One item to print, with what it is sorted by.
    struct Entry {
        var sortKey: [String]
        var text: String
    }

    @OptionGroup
    var groups: AccessGroupOptions

    @OptionGroup
    var interaction: InteractionOptions

    func run() throws {
        interaction.apply()
        try groups.authorize()
        var entries: [Entry] = []
        var lockedClasses: Set<String> = []
        var withheld: Set<Data> = []
        for (order, itemClass) in [kSecClassGenericPassword, kSecClassInternetPassword].enumerated() {
            var (items, locked) = try fetch(itemClass, withData: withPasswords)
            lockedClasses.formUnion(locked)
            if withPasswords && !Interaction.allowed {
                // --no-ui reads passwords with kSecUseAuthenticationUISkip, which leaves out the items
                // that need the user present: they are listed too, from their attributes (which need no
                // check), without a password.
                let read = Set(items.compactMap { $0[kSecValuePersistentRef as String] as? Data })
                let missing = try fetch(itemClass, withData: false).0.filter {
                    ($0[kSecValuePersistentRef as String] as? Data).map { !read.contains($0) } ?? false
                }
                withheld.formUnion(missing.compactMap { $0[kSecValuePersistentRef as String] as? Data })
                items += missing
            }
            for attributes in items {
                let name =
                    (attributes[(order == 0 ? kSecAttrService : kSecAttrServer) as String]).map(ItemPrinter.typed) ?? ""
                let account = attributes[kSecAttrAccount as String].map(ItemPrinter.typed) ?? ""
                let ref = attributes[kSecValuePersistentRef as String] as? Data
                let secret =
                    withPasswords && !(ref.map(withheld.contains) ?? false)
                    ? (attributes[kSecValueData as String] as? Data ?? Data()) : nil
                let text = ItemPrinter.render(itemClass: itemClass as String, attributes: attributes, secret: secret)
                entries.append(Entry(sortKey: [String(order), name, account, text], text: text))
            }
        }
        entries.sort { $0.sortKey.lexicographicallyPrecedes($1.sortKey) }
        print(entries.map(\.text).joined(separator: "\n"), terminator: "")

        // The items shown without a password (--no-ui) fail the command like the locked classes do.
        if !withheld.isEmpty {
            let exitCode = failure(
                "SecItemCopyMatching", errSecInteractionNotAllowed,
                detail: "\(withheld.count) item\(withheld.count == 1 ? " needs" : "s need") a user check; "
                    + "shown without a password")
            guard lockedClasses.isEmpty else { throw lockedFailure(lockedClasses) }
            throw exitCode
        }
        guard lockedClasses.isEmpty else { throw lockedFailure(lockedClasses) }
    }

    /// Reports the locked classes whose items are not shown; returns the exit code to throw.
    func lockedFailure(_ lockedClasses: Set<String>) -> ExitCode {
        let names = Accessibility.allPdmn.filter(lockedClasses.contains)
            .map { "\(KeychainControl.displayName(pdmn: $0)) (\($0))" }
        let exitCode = failure("SecItemCopyMatching", errSecInteractionNotAllowed, detail: nil)
        printError("note: items of these locked classes are not shown: \(names.joined(separator: ", "))")
        return exitCode
    }

    /// The attributes of every item of a class, and which accessibility classes were locked.
    ///
    /// One query first; a locked class anywhere makes SecItemCopyMatching fail as a whole with
    /// errSecInteractionNotAllowed, so then it asks class by class to show what is readable.
    func fetch(_ itemClass: CFString, withData: Bool) throws(ExitCode) -> ([[String: Any]], Set<String>) {
        let (status, items) = query(itemClass, accessible: nil, withData: withData)
        switch status {
        case errSecSuccess: return (items, [])
        case errSecItemNotFound: return ([], [])
        case errSecInteractionNotAllowed: break
        default: throw secItemFailure("SecItemCopyMatching", status)
        }
        var all: [[String: Any]] = []
        var locked: Set<String> = []
        for pdmn in Accessibility.allPdmn {
            let (status, items) = query(itemClass, accessible: pdmn, withData: withData)
            switch status {
            case errSecSuccess: all += items
            case errSecItemNotFound: continue
            case errSecInteractionNotAllowed: locked.insert(pdmn)
            default: throw secItemFailure("SecItemCopyMatching", status)
            }
        }
        return (all, locked)
    }

    /// Every item of `itemClass` (of one accessibility class, if given) with its attributes.
    func query(_ itemClass: CFString, accessible: String?, withData: Bool) -> (OSStatus, [[String: Any]]) {
        var query = ItemQuery.make(itemClass, groups.filter)
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        query[kSecReturnAttributes as String] = kCFBooleanTrue
        query[kSecReturnPersistentRef as String] = kCFBooleanTrue
        if withData {
            query[kSecReturnData as String] = kCFBooleanTrue
            if !Interaction.allowed { query[kSecUseAuthenticationUI as String] = kSecUseAuthenticationUISkip }
        }
        if let accessible { query[kSecAttrAccessible as String] = accessible }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        guard status == errSecSuccess else { return (status, []) }
        let items = (result as? NSArray).map { $0.compactMap(ItemPrinter.dictionary) } ?? []
        return (status, items)
    }
}
