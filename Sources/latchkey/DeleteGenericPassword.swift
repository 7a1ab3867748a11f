import ArgumentParser
import Latchkey

/// `latchkey delete-generic-password`: SecItemDelete on generic passwords.
struct DeleteGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-generic-password",
        abstract: "Delete generic password items.",
        discussion: QueryHelp.delete(examples: [
            "latchkey delete-generic-password -s example.com -a alice",
            "latchkey delete-generic-password -s api.example.com",
        ]))

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

    @OptionGroup
    var groups: AccessGroupOptions

    func run() throws {
        try groups.authorize()
        var filters: [String: Any] = [:]
        if let service { filters[kSecAttrService as String] = service }
        if let account { filters[kSecAttrAccount as String] = account }
        if let label { filters[kSecAttrLabel as String] = label }
        filters.merge(groups.filter) { _, new in new }
        try ItemQuery.delete(kSecClassGenericPassword, filters)
    }
}
