import ArgumentParser
import Latchkey

/// `latchkey delete-internet-password`: SecItemDelete on internet passwords.
struct DeleteInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-internet-password",
        abstract: "Delete internet password items.",
        discussion: QueryHelp.delete(examples: [
            "latchkey delete-internet-password -s mail.example.com -a alice",
            "latchkey delete-internet-password -s git.example.com -r htps",
        ]))

    @OptionGroup(title: "Match")
    var item: InternetOptions

    @Option(name: .customShort("l"), help: ArgumentHelp("Match the label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    func validate() throws {
        guard !item.isEmpty || label != nil else {
            throw ValidationError("give at least one of -s, -a, -r, -P, -p, -d, -t, -l")
        }
    }

    @OptionGroup
    var groups: AccessGroupOptions

    func run() throws {
        try groups.authorize()
        var filters = item.filters
        if let label { filters[kSecAttrLabel as String] = label }
        filters.merge(groups.filter) { _, new in new }
        try ItemQuery.delete(kSecClassInternetPassword, filters)
    }
}
