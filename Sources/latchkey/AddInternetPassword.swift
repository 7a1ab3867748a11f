import ArgumentParser
import Foundation
import Latchkey

/// `latchkey add-internet-password`: SecItemAdd of a kSecClassInternetPassword item.
struct AddInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add-internet-password",
        abstract: "Add an internet password item.",
        usage: """
            latchkey add-internet-password -s <server> -a <account> [-r <protocol>] [-P <port>] [-p <path>] [-d <domain>] [-t <type>] [-w <password> | -w | --password-stdin] [<options>]
            """,
        discussion: """
            Server, account, protocol, port, path, security domain and authentication type, with \
            the access group and the synchronizable flag, identify the item; adding a second item \
            with the same ones fails with errSecDuplicateItem (-25299) unless -U is given.

            The password comes from -w VALUE (visible to other users in ps(1) and kept in shell \
            history: avoid), from a prompt on the terminal when -w is the last argument (or with \
            --prompt), or from standard input with --password-stdin. Without any of them the item's \
            password is empty; with -U, an existing item keeps its password.

            Examples:
              latchkey add-internet-password -s mail.example.com -a alice -r imps -P 993 -w
              printf '%s\\n' "$PW" |
                latchkey add-internet-password -s git.example.com -a bob -r htps \\
                  --password-stdin -U
            """)

    @OptionGroup(title: "Item")
    var item: InternetOptions

    @OptionGroup(title: "Password")
    var password: PasswordSourceOptions

    @OptionGroup(title: "Attributes")
    var attributes: ItemAttributeOptions

    func validate() throws {
        guard item.server != nil else { throw ValidationError("missing -s <server>") }
        guard item.account != nil else { throw ValidationError("missing -a <account>") }
    }

    func run() throws {
        guard !attributes.groups.allGroups else {
            throw ValidationError("--all-groups is for finds, deletes and dumps; name one group with --access-group")
        }
        attributes.interaction.apply()
        try attributes.groups.authorize()
        var primaryKey = item.primaryKey.merging(attributes.keyAttributes) { _, new in new }
        primaryKey[kSecClass as String] = kSecClassInternetPassword

        let secret: NSMutableData?
        do throws(InputFailure) {
            secret = try password.read()
        } catch {
            throw error.report()
        }
        defer { secret?.wipe() }
        try addOrUpdate(
            primaryKey: primaryKey, attributes: try attributes.changesWithAccessControl(), secret: secret,
            update: attributes.update)
    }
}
