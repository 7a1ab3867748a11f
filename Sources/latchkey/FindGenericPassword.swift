import ArgumentParser
import Latchkey

/// `latchkey find-generic-password`: SecItemCopyMatching on generic passwords.
struct FindGenericPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-generic-password",
        abstract: "Find a generic password item and print it.",
        discussion: QueryHelp.find(examples: [
            "latchkey find-generic-password -s example.com -a alice",
            "TOKEN=$(latchkey find-generic-password -s api.example.com -a ci -w)",
        ]))

    @Option(name: .customShort("s"), help: ArgumentHelp("Match the service (kSecAttrService).", valueName: "service"))
    var service: String?

    @Option(name: .customShort("a"), help: ArgumentHelp("Match the account (kSecAttrAccount).", valueName: "account"))
    var account: String?

    @Option(name: .customShort("l"), help: ArgumentHelp("Match the label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    @Option(
        name: .customShort("G"),
        help: ArgumentHelp("Match the generic attribute (kSecAttrGeneric).", valueName: "value"))
    var generic: String?

    @OptionGroup
    var output: PasswordOutputOptions

    @OptionGroup
    var groups: AccessGroupOptions

    @OptionGroup
    var interaction: InteractionOptions

    func run() throws {
        interaction.apply()
        try groups.authorize()
        var filters: [String: Any] = [:]
        if let service { filters[kSecAttrService as String] = service }
        if let account { filters[kSecAttrAccount as String] = account }
        if let label { filters[kSecAttrLabel as String] = label }
        if let generic { filters[kSecAttrGeneric as String] = generic }
        filters.merge(groups.filter) { _, new in new }
        try ItemQuery.find(
            kSecClassGenericPassword, filters, passwordOnly: output.passwordOnly,
            withPassword: output.withPassword)
    }
}
