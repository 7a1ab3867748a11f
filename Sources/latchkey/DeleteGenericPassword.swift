import ArgumentParser
import Latchkey

/// `latchkey delete-generic-password`: SecItemDelete on generic passwords.
struct DeleteGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-generic-password",
        abstract: "Delete generic password items.",
        discussion: """
            Deletes every item that matches all the given attributes, like SecItemDelete, and \
            prints how many were deleted when they can be counted (not while their class is \
            locked). Deleting works after 'latchkey lock' but not after 'latchkey lock --all'. At \
            least one attribute is required, so that a bare command cannot empty the keychain. \
            Exits with status 44 if no item matches.

            Examples:
              latchkey delete-generic-password -s example.com -a alice
              latchkey delete-generic-password -s api.example.com
            """)

    @Option(name: .customShort("s"), help: ArgumentHelp("Match the service (kSecAttrService).", valueName: "service"))
    var service: String?

    @Option(name: .customShort("a"), help: ArgumentHelp("Match the account (kSecAttrAccount).", valueName: "account"))
    var account: String?

    @Option(name: .customShort("l"), help: ArgumentHelp("Match the label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    func validate() throws {
        guard service != nil || account != nil || label != nil else {
            throw ValidationError("give at least one of -s, -a, -l")
        }
    }

    func run() throws {
        var filters: [String: Any] = [:]
        if let service { filters[kSecAttrService as String] = service }
        if let account { filters[kSecAttrAccount as String] = account }
        if let label { filters[kSecAttrLabel as String] = label }
        try ItemQuery.delete(kSecClassGenericPassword, filters)
    }
}
