import ArgumentParser
import Foundation
import Latchkey

/// `latchkey add-generic-password`: SecItemAdd of a kSecClassGenericPassword item.
struct AddGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-generic-password",
        abstract: "Add a generic password item.",
        usage: """
            latchkey add-generic-password -s <service> -a <account> [-w <password> | -w | --password-stdin] [<options>]
            """,
        discussion: """
            Service (-s) and account (-a), with the access group and the synchronizable flag, \
            identify the item: adding a second item with the same ones fails with \
            errSecDuplicateItem (-25299) unless -U is given.

            The password comes from -w VALUE (visible to other users in ps(1) and kept in shell \
            history: avoid), from a prompt on the terminal when -w is the last argument (or with \
            --prompt), or from standard input with --password-stdin. Without any of them the item's \
            password is empty, as with macOS 'security'; with -U, an existing item keeps its \
            password.

            Examples:
              latchkey add-generic-password -s example.com -a alice -w
              printf '%s\\n' "$TOKEN" |
                latchkey add-generic-password -s api.example.com -a ci --password-stdin -U
              latchkey add-generic-password -s backup -a restic -l "Restic repository" \\
                --accessible after-first-unlock -w
            """)

    @Option(name: .customShort("s"), help: ArgumentHelp("Service name (kSecAttrService).", valueName: "service"))
    var service: String

    @Option(name: .customShort("a"), help: ArgumentHelp("Account name (kSecAttrAccount).", valueName: "account"))
    var account: String

    @Option(
        name: .customShort("G"), help: ArgumentHelp("Generic attribute value (kSecAttrGeneric).", valueName: "value"))
    var generic: String?

    @OptionGroup(title: "Password")
    var password: PasswordSourceOptions

    @OptionGroup(title: "Attributes")
    var attributes: ItemAttributeOptions

    func run() throws {
        guard !attributes.groups.allGroups else {
            throw ValidationError("--all-groups is for finds, deletes and dumps; name one group with --access-group")
        }
        attributes.interaction.apply()
        try attributes.groups.authorize()
        var primaryKey = attributes.keyAttributes
        primaryKey[kSecClass as String] = kSecClassGenericPassword
        primaryKey[kSecAttrService as String] = service
        primaryKey[kSecAttrAccount as String] = account
        var changes = try attributes.changesWithAccessControl()
        if let generic { changes[kSecAttrGeneric as String] = generic }

        let secret: NSMutableData?
        do throws(InputFailure) {
            secret = try password.read()
        } catch {
            throw error.report()
        }
        defer { secret?.wipe() }
        try addOrUpdate(primaryKey: primaryKey, attributes: changes, secret: secret, update: attributes.update)
    }
}
