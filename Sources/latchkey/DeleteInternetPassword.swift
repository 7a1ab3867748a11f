import ArgumentParser
import Latchkey

/// `latchkey delete-internet-password`: SecItemDelete on internet passwords.
struct DeleteInternetPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-internet-password",
        abstract: "Delete internet password items.",
        discussion: """
            Deletes every item that matches all the given attributes, like SecItemDelete, and \
            prints how many were deleted when they can be counted (not while their class is \
            locked). Deleting works after 'latchkey lock' but not after 'latchkey lock --all'. At \
            least one attribute is required, so that a bare command cannot empty the keychain. \
            Exits with status 44 if no item matches.

            Examples:
              latchkey delete-internet-password -s mail.example.com -a alice
              latchkey delete-internet-password -s git.example.com -r htps
            """)

    @OptionGroup(title: "Match")
    var item: InternetOptions

    @Option(name: .customShort("l"), help: ArgumentHelp("Match the label (kSecAttrLabel).", valueName: "label"))
    var label: String?

    func validate() throws {
        guard !item.isEmpty || label != nil else {
            throw ValidationError("give at least one of -s, -a, -r, -P, -p, -d, -t, -l")
        }
    }

    func run() throws {
        var filters = item.filters
        if let label { filters[kSecAttrLabel as String] = label }
        try ItemQuery.delete(kSecClassInternetPassword, filters)
    }
}
