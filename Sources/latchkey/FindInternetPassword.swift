import ArgumentParser
import Latchkey

/// `latchkey find-internet-password`: SecItemCopyMatching on internet passwords.
struct FindInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "find-internet-password",
        abstract: "Find an internet password item and print it.",
        discussion: QueryHelp.find(examples: [
            "latchkey find-internet-password -s mail.example.com -a alice",
            "latchkey find-internet-password -s git.example.com -r htps -w",
        ]))

    @OptionGroup(title: "Match")
    var item: InternetOptions

    @Option(name: .customShort("l"), help: ArgumentHelp("Match the label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    @OptionGroup
    var output: PasswordOutputOptions

    @OptionGroup
    var groups: AccessGroupOptions

    @OptionGroup
    var interaction: InteractionOptions

    func run() throws {
        interaction.apply()
        try groups.authorize()
        var filters = item.filters
        if let label { filters[kSecAttrLabel as String] = label }
        filters.merge(groups.filter) { _, new in new }
        try ItemQuery.find(
            kSecClassInternetPassword, filters, passwordOnly: output.passwordOnly,
            withPassword: output.withPassword)
    }
}
